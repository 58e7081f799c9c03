# frozen_string_literal: true

module Sluice
  module Polling
    # When each client's periodic poll is due: a binary min-heap of
    # [time, token], one entry per client. The poller looks only at the top,
    # so a turn with nothing due costs nothing per client. Entries are lazy: a
    # client served meanwhile (its pipe woke us) or gone is found out when its
    # entry reaches the top, and re-scheduled or dropped then.
    # Used by the poller thread only.
    class Schedule
      def initialize
        @heap = []
      end

      def empty? = @heap.empty?

      # The earliest time due, or nil.
      def first_at = @heap.first&.first

      # Schedules token's next poll at time (monotonic seconds).
      def push(time, token)
        @heap << [time, token]
        sift_up(@heap.size - 1)
      end

      # Removes and yields (at, token) of every entry due at or before horizon.
      # Entries pushed by the block are not yielded again in this call.
      def pop_until(horizon, &)
        due = []
        due << pop while !@heap.empty? && @heap.first.first <= horizon
        due.each(&)
      end

      # Entries held (one per client, including gone ones not yet dropped).
      def size = @heap.size

      private

      def pop
        top = @heap.first
        last = @heap.pop
        unless @heap.empty?
          @heap[0] = last
          sift_down(0)
        end
        top
      end

      def sift_up(index)
        while index.positive?
          parent = (index - 1) / 2
          break if @heap[parent].first <= @heap[index].first

          @heap[parent], @heap[index] = @heap[index], @heap[parent]
          index = parent
        end
      end

      def sift_down(index)
        size = @heap.size
        loop do
          child = (2 * index) + 1
          break if child >= size

          child += 1 if child + 1 < size && @heap[child + 1].first < @heap[child].first
          break if @heap[index].first <= @heap[child].first

          @heap[index], @heap[child] = @heap[child], @heap[index]
          index = child
        end
      end
    end
  end
end
