# frozen_string_literal: true

module Sluice
  class Producer
    # Transactions that failed in a row, and how long the next one waits: an
    # application that retries at once would otherwise spin on a producer that
    # refuses every call (a fenced one refuses each within microseconds).
    # A failure is a TransactionError or a fatal error; the block's own errors
    # are not. The wait doubles with each failure, from FIRST up to LONGEST,
    # and what passed since the last failure counts towards it.
    class FailureBackoff
      # The wait after one failure (s).
      FIRST = 0.1
      # The longest wait (s).
      LONGEST = 5.0

      # @param clock [#call] monotonic seconds
      def initialize(clock: -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) })
        @clock = clock
        @count = 0
        @failed_at = nil
      end

      # @return [Integer] failures in a row
      attr_reader :count

      # Notes error if it is a failure of the transaction machinery.
      # @param error [Exception]
      # @return [void]
      def failed(error)
        return unless self.class.failure?(error)

        @count += 1
        @failed_at = @clock.call
      end

      # A commit ends the run.
      # @return [void]
      def reset = @count = 0

      # @return [Float] what is left of the wait before the next transaction (s)
      def remaining
        return 0.0 if @count.zero?

        [[FIRST * (2**(@count - 1)), LONGEST].min - (@clock.call - @failed_at), 0.0].max
      end

      # Sleeps what is left of the wait (a fiber scheduler's sleep under one).
      # @return [void]
      def wait
        left = remaining
        sleep(left) if left.positive?
      end

      # @param error [Exception]
      # @return [Boolean] a transactional call failed, or the client met a fatal error
      def self.failure?(error)
        error.is_a?(Errors::TransactionError) || (error.respond_to?(:fatal?) && error.fatal? == true)
      end
    end
  end
end
