# frozen_string_literal: true

module Sluice
  module Shared
    # The one clock of every deadline and duration: monotonic seconds (a Float),
    # never the wall clock, which NTP and people move. `include Shared::Clock` gives a
    # class private #now and #ms_until.
    module Clock
      module_function

      # @return [Float] seconds on the monotonic clock
      def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

      # Whole milliseconds from now until deadline (a #now value), 0 once it passed.
      def ms_until(deadline) = [((deadline - now) * 1000).ceil, 0].max
    end
  end
end
