# frozen_string_literal: true

module Sluice
  module CLI
    # A command line that cannot be run as given: exit code 2, with the usage.
    UsageError = Class.new(StandardError)
  end
end
