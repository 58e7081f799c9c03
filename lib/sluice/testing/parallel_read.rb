# frozen_string_literal: true

module Sluice
  module Testing
    # Testing::Consumer#each_message(concurrency: N): the real consumer's
    # Workers and Lanes (so the same blocks run side by side in the same
    # order rules, on threads or, under a fiber scheduler, on its fibers)
    # over the double's messages, whose offsets its Ledger
    # stores as the real consumer's does: never past an unfinished block.
    #
    # The read ends as the double's do, when nothing is left (or at #stop, or
    # a block's error, which is raised once the running blocks finished). What
    # did not finish then is rewound: each partition goes back to its lowest
    # unfinished message, and messages after it are handed out again even if
    # their blocks finished (the real consumer hands out only the unfinished
    # ones again; both are at least once).
    class ParallelRead
      # Longest wait (s) for a block to end before looking for messages again.
      WAIT = 0.05

      # @param double [#take_one, #finish_one, #rewind_unfinished, #stopping?] Testing::Consumer's private side
      def initialize(settings, double:, block:)
        @settings = settings
        @double = double
        @block = block
        @failure = nil
      end

      # Reads until the double stops or a block raises, N blocks at a time; raises that block's error.
      def run
        @workers = Sluice::Consumer::Workers.new(count: @settings.concurrency, ordering: @settings.ordering, block: @block,
                                                 stopped: @double.method(:stopping?))
        read
        @workers.settle(@settings.finish_within / 1000.0)
        apply
        @double.rewind_unfinished
        raise @failure.error if @failure
      ensure
        @workers&.stop
      end

      private

      def read
        until apply || @double.stopping?
          if @workers.size < @settings.max_buffered && (message = @double.take_one)
            @workers.add(message)
          elsif @workers.size.zero?
            break
          else
            @workers.wait_for_finish(WAIT)
          end
        end
      end

      # @return [Boolean] a block raised
      def apply
        @workers.finished!.each { |finish| finish.error ? (@failure ||= finish) : @double.finish_one(finish.message) }
        !@failure.nil?
      end
    end
  end
end
