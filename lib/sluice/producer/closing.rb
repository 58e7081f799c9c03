# frozen_string_literal: true

module Sluice
  class Producer
    # A producer's close, from any thread, fiber, callback, signal handler or
    # at exit: its open transactions settled, its buffer sent, its deliveries
    # waited for (what is left after the timeout purged), its client
    # disconnected. The status, the lock and the deadline it runs under are
    # its ClientLife's; this object holds what the close dropped.
    # @api private
    class Closing
      include Clock

      # @param life [ClientLife] the producer's
      # @param transactions [Transactions] the producer's: settled first
      # @param buffering [Buffering] the producer's: sent before the wait
      # @param deliveries [Deliveries] the producer's: waited for, then orphaned
      def initialize(life:, transactions:, buffering:, deliveries:)
        @life = life
        @transactions = transactions
        @buffering = buffering
        @deliveries = deliveries
        @dropped = 0
      end

      # Producer#close (see there).
      # @return [nil]
      def close(timeout)
        return if @life.closed?
        return close_from_trap(timeout) if Blocking.trap_context?

        if @transactions.own?
          raise Errors::ProducerTransactionalCloseAttemptError,
                "producer #{@life.id}: close inside its own transaction block would leave the transaction open; finish the block first"
        end

        close_now(timeout)
      end

      # Producer#close_at_exit: the usual close, and loudly so when messages had to be dropped.
      # @return [void]
      def close_at_exit
        close(@life.config.max_wait_timeout)
        return if @dropped.zero?

        config = @life.config
        message = "producer #{@life.id} was still open at exit; closing it dropped #{@dropped} message(s) " \
                  "not delivered within max_wait_timeout (#{config.max_wait_timeout} ms)"
        config.logger.error(message)
        @life.monitor.instrument("error.occurred", producer_id: @life.id, type: "producer.close_at_exit",
                                                   error: Errors::ProduceError.new(KafkaError.new(PURGED, message)))
      end

      private

      def close_now(timeout, interrupted: nil)
        return if @life.held_by_current? # a callback of our own close: the outer call finishes
        # On the polling thread, never wait for a close running elsewhere: it waits
        # for this very thread, and finishes as soon as the callback returns.
        return if @life.busy_on_poller?

        @life.begin_close(timeout) # before the lock: a transaction of another thread bounds its waits by it
        @life.close_under_lock { shut_down(interrupted) unless @life.client.forked? }
        nil
      end

      # See ClientLife#close_on_own_thread. The transaction the signal
      # interrupted (if any) is the interrupted thread's: close may abort it.
      def close_from_trap(timeout)
        return if @life.held_by_current? # the code the signal interrupted was closing us: it finishes after the handler

        interrupted = Thread.current
        @life.close_on_own_thread(timeout || @life.config.max_wait_timeout) { close_now(timeout, interrupted: interrupted) }
      end

      def shut_down(interrupted)
        deadline = @life.deadline
        @transactions.settle(deadline, interrupted)
        unsent = @buffering.flush_at_close
        state = @life.state
        purged_before = state.purged
        unless @deliveries.wait(deadline && ms_until(deadline))
          @life.client.purge
          @deliveries.wait(@life.config.max_wait_timeout)
        end
        orphans = @deliveries.disconnect
        @dropped = state.purged - purged_before + orphans + unsent
      end
    end
  end
end
