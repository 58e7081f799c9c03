# frozen_string_literal: true

module Sluice
  # The machinery every client kind shares: a client's life and its close's deadline, its config, hooks and
  # secrets, blocking calls under a fiber scheduler, shutdown on signals, the clock, how values are shown.
  module Shared
  end
end
