# frozen_string_literal: true

module Sluice
  class Producer
    # Waiting for a producer's delivery reports: Producer#flush, close's
    # wait, and the handles a disconnect leaves without a report. It reads
    # the client and its poll state from the producer's ClientLife at each
    # call (a reload replaces them).
    # @api private
    class Deliveries
      include Clock

      # @param life [ClientLife] the producer's
      # @param notifier [DeliveryNotifier] the producer's
      # @param poller [Polling::Poller, Polling::PollThread] the producer's
      def initialize(life:, notifier:, poller:)
        @life = life
        @notifier = notifier
        @poller = poller
      end

      # Producer#flush (see there), once the producer is known to be open.
      # @return [Boolean] false when timeout_ms passed first
      def flush(timeout_ms)
        state = @life.state
        refusals = state.refusals
        deadline = timeout_ms && now + (timeout_ms / 1000.0)
        late = now + RefusableRead::GRACE
        loop do
          done = wait(flush_slice(deadline, late))
          raise_refused(state, refusals, late, done)
          return done if done || (deadline && now >= deadline)
        end
      end

      # rd_kafka_flush only waits (the poller serves the queue meanwhile); on the
      # poller's own thread, or when its thread is gone (process teardown),
      # nobody else would serve it, so we do.
      # @param timeout_ms [Integer, nil] nil: no limit
      # @return [Boolean] every message produced so far has its report
      def wait(timeout_ms)
        return pump_until_delivered(timeout_ms) if @poller.in_poller_thread? || !@poller.alive?

        client = @life.client
        state = @life.state
        started = now
        return false unless Blocking.call { client.flush(timeout_ms || -1) }

        left = timeout_ms && [timeout_ms - ((now - started) * 1000), 0].max
        @notifier.wait_until(left) { state.settled? }
      end

      # Disconnects the client (ClientLife#disconnect); handles that never
      # got a report resolve with `error` (a purge, or the fatal error of a reload).
      # @return [Integer] how many
      def disconnect(error = nil)
        @life.disconnect do |client, state|
          orphans = client.take_inflight
          orphans.each { |handle| state.orphaned(handle, error) }
          @notifier.notify
          orphans.size
        end
      end

      private

      # rd_kafka_flush cannot be woken: flush waits in slices (RefusableRead::GRACE,
      # then RefusableRead::SLICE), so a refusal reported before it began
      # (said again only at librdkafka's next failed reconnect, up to 10 s
      # later) ends it too.
      def flush_slice(deadline, late)
        slice = now < late ? ms_until(late) : RefusableRead::SLICE
        deadline ? [slice, ms_until(deadline)].min : slice
      end

      # Messages failed with a refusal during the flush, or it is late while one is current.
      def raise_refused(state, refusals, late, done)
        failure = state.auth_failure if state.refusals != refusals
        failure ||= state.refusing_failure if !done && now >= late
        raise Errors::AuthenticationError, failure if failure
      end

      def pump_until_delivered(timeout_ms)
        client = @life.client
        state = @life.state
        deadline = timeout_ms && now + (timeout_ms / 1000.0)
        until client.outq_len.zero?
          return false if deadline && now >= deadline

          state.pump
        end
        true
      end
    end
  end
end
