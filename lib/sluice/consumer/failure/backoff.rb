# frozen_string_literal: true

module Sluice
  class Consumer
    module Failure
      # How long a retry waits: exponential from the range's low end, with
      # jitter (between half the step and the step), never past its high end;
      # and the wait itself, which a stop or a close ends.
      # @api private
      class Backoff
        include Clock

        # How often (s) a wait looks whether the read was stopped. A stop
        # (Consumer#stop, close) only sets a flag, from any thread or a signal
        # handler that may not lock: looking is what needs no lock.
        STOP_CHECK = 0.05

        def initialize(range)
          @low = range.begin.to_f
          @high = range.end.to_f
          @lock = Mutex.new
          @never = ConditionVariable.new # only timed waits: a Mutex#sleep a fiber scheduler sees
        end

        # @param attempt [Integer] the attempt that failed (1: the first run)
        # @return [Float] seconds before the next
        def delay(attempt)
          step = [@low * (2**(attempt - 1)), @high].min
          rand((step / 2)..step).clamp(@low, @high)
        end

        # Waits seconds, or less when the read is stopped meanwhile.
        # @param stopped [#call] true once the read was stopped
        # @return [Boolean] false: stopped
        def wait(seconds, stopped)
          deadline = now + seconds
          @lock.synchronize do
            until stopped.call
              left = deadline - now
              return true unless left.positive?

              Blocking.wait(@never, @lock, [left, STOP_CHECK].min)
            end
          end
          false
        end
      end
    end
  end
end
