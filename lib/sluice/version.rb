# frozen_string_literal: true

module Sluice
  VERSION = "0.1.0"
end
