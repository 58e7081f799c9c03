# frozen_string_literal: true

module Sluice
  class Consumer
    # Closing a consumer: from its reader, from another thread or fiber while
    # it reads or waits, from a listener on the polling thread, a signal
    # handler or at exit.
    module Lifecycle
      # How long a close started from a signal handler is waited for there
      # beyond its own timeout; after that it finishes in the background.
      TRAP_GRACE = 10

      # Stops reading, commits the stored offsets (with auto commit), leaves
      # the group (serving the rebalance that gives the partitions up) and
      # releases everything. Idempotent. Called inside each_message's block
      # (or from a listener while another thread reads), it takes effect when
      # the reader returns.
      # @param timeout [Integer] ms for the reader to return and for leaving the group
      def close(timeout: @config.max_wait_timeout)
        return if @closed
        return close_from_trap(timeout) if Blocking.trap_context?

        @inbox.stop
        return defer_close(timeout) if close_later?(timeout)

        close_now(timeout)
      end

      # @api private — Shutdown's at_exit hook.
      def close_at_exit = close

      private

      # Inside the reader's own block (it returns after this message), or on a
      # polling thread, which must not wait for a reader that may wait for it.
      def close_later?(timeout)
        return false unless @inbox.reading?
        return true if @inbox.reader?(Fiber.current) || Polling.thread?

        !@inbox.wait_idle(timeout / 1000.0)
      end

      def defer_close(timeout)
        @close_after_reading = timeout
        nil
      end

      def after_reading
        close(timeout: @close_after_reading) if @close_after_reading && !@inbox.reading?
      end

      def close_now(timeout)
        @lifecycle.synchronize do
          return if @closed

          @client.forked? ? (@closed = true) : shut_down(timeout)
          Shutdown.untrack(self)
        end
        instrument("consumer.closed")
      end

      def shut_down(timeout)
        deadline = now + (timeout / 1000.0)
        @inbox.store_processed
        commit_before_revoke
        error = @client.close_begin
        instrument("error.occurred", type: "consumer.close_error", error: KafkaError.from_tuple(error)) if error
        @inbox.serve_until_closed(deadline)
        Thread.handle_interrupt(Object => :never) do
          @inbox.shut
          @poller.unregister(@state)
          Blocking.call(interruptible: false) { @client.destroy }
        end
        @closed = true
      end

      # See Producer::Lifecycle#close_from_trap: a signal handler may not lock
      # a Mutex, and may have interrupted code that holds one we need.
      def close_from_trap(timeout)
        @inbox.stop
        closer = Thread.new { close(timeout: timeout) }
        closer.name = "sluice.close##{@id}"
        closer.report_on_exception = false
        closer.join((timeout / 1000.0) + TRAP_GRACE)
        nil
      end

      def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end
