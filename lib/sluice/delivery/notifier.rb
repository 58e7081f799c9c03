# frozen_string_literal: true

module Sluice
  module Delivery
    # Wakes the threads and fibers waiting on one producer's delivery handles.
    #
    # One Mutex + ConditionVariable per producer instead of one per handle: the
    # poller resolves handles in batches and broadcasts once per batch, and only
    # when someone waits. Both primitives cooperate with a Fiber.scheduler, so a
    # waiting fiber lets the others run.
    #
    # A wait on the producer's own polling thread (produce_sync in a callback)
    # cannot sleep: nobody else would deliver the report. It has the poll state
    # serve the queue instead.
    class Notifier
      include Shared::Clock

      attr_reader :max_wait_timeout

      def initialize(max_wait_timeout)
        @max_wait_timeout = max_wait_timeout
        @mutex = Mutex.new
        @resolved = ConditionVariable.new
        @waiters = 0
        @poller = nil
        @state = nil
      end

      # The producer's polling and its poll state, for inline waits.
      # @api private
      def attach(poller, state)
        @poller = poller
        @state = state
      end

      # Called by the poller after resolving handles. Reading @waiters unlocked is
      # safe: a waiter counts itself before checking its handle, so it either sees
      # the resolution or is already waiting when we take the lock to broadcast.
      def notify
        return if @waiters.zero?

        @mutex.synchronize { @resolved.broadcast }
      end

      # Blocks until handle is resolved; returns its report.
      # @raise [Errors::WaitTimeoutError] after timeout_ms (the handle stays pending)
      # @raise [Errors::AuthenticationError] the brokers refuse the producer's
      #   credentials or TLS, and the report is RefusableRead::GRACE s late (the handle
      #   stays pending: its message fails with the refusal at librdkafka's
      #   next failed reconnect, up to 10 s later, or is delivered)
      def wait_for(handle, timeout_ms)
        deadline = now + (timeout_ms / 1000.0)
        late = now + Shared::RefusableRead::GRACE
        return pump_until(handle, deadline, late, timeout_ms) if @poller&.in_poller_thread?

        @mutex.synchronize do
          @waiters += 1
          while handle.pending?
            left = deadline - now
            raise Errors::WaitTimeoutError.new("no delivery report within #{timeout_ms} ms", handle: handle) if left <= 0

            raise_refused if now >= late
            @resolved.wait(@mutex, now < late ? [late - now, left].min : left)
          end
          handle.report
        ensure
          @waiters -= 1
        end
      end

      # Blocks until the block returns true (checked after every #notify).
      # @return [Boolean] false when timeout_ms (nil: no limit) passed first
      def wait_until(timeout_ms)
        deadline = timeout_ms && now + (timeout_ms / 1000.0)
        @mutex.synchronize do
          @waiters += 1
          until yield
            left = deadline && deadline - now
            return false if left && left <= 0

            @resolved.wait(@mutex, left)
          end
          true
        ensure
          @waiters -= 1
        end
      end

      private

      def pump_until(handle, deadline, late, timeout_ms)
        while handle.pending?
          raise Errors::WaitTimeoutError.new("no delivery report within #{timeout_ms} ms", handle: handle) if now >= deadline

          raise_refused if now >= late
          @state.pump
        end
        handle.report
      end

      # A refusal librdkafka reported before this wait began says so again only
      # at its next failed reconnect (its backoff grows to 10 s): a report that
      # is late while the refusal is current is taken as refused.
      def raise_refused
        failure = @state&.refusing_failure
        raise Errors::AuthenticationError, failure if failure
      end
    end
  end
end
