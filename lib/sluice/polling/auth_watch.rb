# frozen_string_literal: true

module Sluice
  module Polling
    # Tells, from librdkafka's error events, when an authentication or TLS
    # failure keeps every broker down: an :authentication or :ssl error, then
    # all_brokers_down. Nothing else says so: librdkafka only reconnects.
    class AuthWatch
      ALL_BROKERS_DOWN = :all_brokers_down
      # A failure still explains all_brokers_down this long (s) after it was
      # last seen: librdkafka's reconnect backoff tops out at 10 s, and it
      # does not repeat an unchanged error at each attempt.
      FRESH = 15

      def initialize
        @failure = nil
        @seen_at = 0
      end

      # @return [KafkaError, nil] the failure, when this error says that it
      #   now keeps every broker down
      def observe(error)
        if error.authentication?
          @failure = error
          @seen_at = now
          nil
        elsif error.code == ALL_BROKERS_DOWN && current
          @seen_at = now
          @failure
        end
      end

      # The failure while it may still explain brokers being down, or nil.
      def current
        failure = @failure
        failure if failure && now - @seen_at < FRESH
      end

      private

      def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end
