# frozen_string_literal: true

module Sluice
  class Admin
    # Settings of one admin client, filled in the block given to Admin.new and
    # frozen once valid.
    class Config < ClientConfig
      # How long (ms) one admin call may take, its round trips to the brokers included.
      attr_accessor :max_wait_timeout

      def initialize
        super
        @max_wait_timeout = 30_000
      end

      # Checks every setting (Admin.new calls it before freezing the config).
      # @return [self]
      # @raise [Errors::ConfigurationInvalidError] naming the first bad setting
      def validate!
        super
        positive!(:max_wait_timeout, @max_wait_timeout)
        # librdkafka takes the wait as a 32-bit int of milliseconds.
        invalid!("max_wait_timeout must be at most #{INT32_MAX} ms, got #{@max_wait_timeout.inspect}") if @max_wait_timeout > INT32_MAX
        self
      end
    end
  end
end
