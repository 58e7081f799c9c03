# frozen_string_literal: true

module Sluice
  class Admin
    # The admin's blocking reads in progress (Transport#blocking). librdkafka
    # cannot wake one (a metadata or offsets read), and #destroy must wait for
    # it to leave the handle: a close waits for them only until its deadline,
    # then leaves the teardown to a thread of its own (Lifecycle#shut_down).
    # @api private
    class Reads
      include Shared::Clock

      def initialize
        @lock = Mutex.new
        @changed = ConditionVariable.new
        @running = 0
      end

      # Counts the block's read in while it runs.
      def track
        @lock.synchronize { @running += 1 }
        begin
          yield
        ensure
          @lock.synchronize do
            @running -= 1
            @changed.broadcast
          end
        end
      end

      # @return [Boolean] no read runs any more; false once seconds passed first
      def wait_idle(seconds)
        deadline = now + seconds
        @lock.synchronize do
          until @running.zero?
            left = deadline - now
            return false if left <= 0

            Shared::Blocking.wait(@changed, @lock, left)
          end
        end
        true
      end
    end
  end
end
