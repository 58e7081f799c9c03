# frozen_string_literal: true

module Sluice
  module Shared
    # A blocking metadata read (partition counts, watermarks, offsets for a
    # time, the cluster's topics) asked in slices within the caller's wait, so
    # that a refusal of the client's credentials or TLS raises
    # AuthenticationError within about a second instead of the whole wait
    # ending in a timeout: librdkafka's read cannot be woken, and it reports a
    # refusal only as a timeout. Reads may be asked again.
    module RefusableRead
      SLICE = 1_000 # ms, one ask's wait
      # How late (s) an answer may be before a refusal librdkafka reported
      # earlier, and still current, is taken as its reason: a broker that
      # accepts the client answers well within it, and librdkafka says so again
      # only at its next failed reconnect (its backoff grows to 10 s). Used by
      # every wait that can be woken (delivery reports, flush, admin results).
      GRACE = 0.5
      # A read that ran out of its slice: tried again until the deadline.
      TIMED_OUT = KafkaError.number_for(:timed_out)
      # A read whose connection broke (a broker restarting, a connection reset):
      # asked again, at most TRANSPORT_ASKS times in all, TRANSPORT_BACKOFF s
      # apart. A blip is ridden out; brokers that stay unreachable are still
      # reported at once, not after the whole wait.
      TRANSPORT = KafkaError.number_for(:transport)
      # (see TRANSPORT)
      TRANSPORT_ASKS = 3
      # (see TRANSPORT)
      TRANSPORT_BACKOFF = 0.1

      module_function

      # Yields the ms one ask may wait until the result (an Array whose first
      # element is librdkafka's error code) is a broker's answer, or the
      # deadline (a Shared::Clock.now value) passed. Between two asks, `refused`
      # (the client's current refusal, or nil) raises.
      # @return [Array] the block's last result
      # @raise [Errors::AuthenticationError]
      def call(deadline, refused)
        broken = 0
        loop do
          result = yield(Shared::Clock.ms_until(deadline).clamp(1, SLICE))
          code = result.first
          return result unless code.negative? # answered by a broker (or no error)

          failure = refused.call
          raise Errors::AuthenticationError, failure if failure
          return result unless Shared::Clock.now < deadline && again?(code, broken += (code == TRANSPORT ? 1 : 0))
        end
      end

      # Whether a read that failed with code is asked again (after a pause for a broken connection).
      def again?(code, broken)
        return true if code == TIMED_OUT
        return false unless code == TRANSPORT && broken < TRANSPORT_ASKS

        sleep(TRANSPORT_BACKOFF)
        true
      end
    end
  end
end
