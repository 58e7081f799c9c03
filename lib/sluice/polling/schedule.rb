# frozen_string_literal: true

module Sluice
  module Polling
    # When each client's periodic poll is due: a binary min-heap of
    # (time, token), one entry per client. The poller looks only at the top,
    # so a turn with nothing due costs nothing per client. Entries are lazy: a
    # client served meanwhile (its pipe woke us) or gone is found out when its
    # entry reaches the top, and re-scheduled or dropped then.
    #
    # Times and tokens sit in two parallel arrays, and entries move without
    # temporary arrays: re-scheduling a client allocates nothing, so 1,000
    # idle clients polled once a second do not make the poller thread run
    # the GC (whose every step, in a process with thousands of librdkafka
    # threads, also costs a process-CPU-time reading that walks all of them).
    # Used by the poller thread only.
    class Schedule
      def initialize
        @times = []
        @tokens = []
      end

      def empty? = @times.empty?

      # The earliest time due, or nil.
      def first_at = @times.first

      # Schedules token's next poll at time (monotonic seconds).
      def push(time, token)
        @times << time
        @tokens << token
        sift_up(@times.size - 1)
      end

      # Removes and yields (at, token) of every entry due at or before horizon.
      # Entries pushed by the block are not yielded again in this call.
      def pop_until(horizon)
        due = [] # at, token, at, token, ...
        while !@times.empty? && @times.first <= horizon
          due << @times.first << @tokens.first
          pop
        end
        i = 0
        while i < due.size
          yield due[i], due[i + 1]
          i += 2
        end
      end

      # Entries held (one per client, including gone ones not yet dropped).
      def size = @times.size

      private

      def pop
        time = @times.pop
        token = @tokens.pop
        return if @times.empty?

        @times[0] = time
        @tokens[0] = token
        sift_down(0)
      end

      def sift_up(index)
        time = @times[index]
        token = @tokens[index]
        while index.positive?
          parent = (index - 1) / 2
          break if @times[parent] <= time

          move(parent, index)
          index = parent
        end
        @times[index] = time
        @tokens[index] = token
      end

      def sift_down(index)
        size = @times.size
        time = @times[index]
        token = @tokens[index]
        while (child = (2 * index) + 1) < size
          child += 1 if child + 1 < size && @times[child + 1] < @times[child]
          break if time <= @times[child]

          move(child, index)
          index = child
        end
        @times[index] = time
        @tokens[index] = token
      end

      def move(source, target)
        @times[target] = @times[source]
        @tokens[target] = @tokens[source]
      end
    end
  end
end
