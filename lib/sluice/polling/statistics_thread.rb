# frozen_string_literal: true

module Sluice
  module Polling
    # Parses librdkafka's statistics and runs their listeners off the pollers.
    #
    # A consumer of 2,000 partitions emits about 3 MB of JSON a second; parsed
    # and decorated on the poller, with a metrics listener, that held up every
    # other client of the poller (another producer's produce_sync p99: 238 ms
    # with statistics, 72 ms without; issue 44). The poller now hands the JSON
    # string over here and goes on: one thread per process ("sluice.statistics",
    # started at the first emission that has a listener) parses it and runs
    # the `statistics.emitted` listeners, one emission at a time.
    #
    # At most one emission per client waits: a newer one replaces it (a slow
    # listener sees the latest numbers, and memory stays bounded). Like one
    # nobody heard, a replaced emission is not part of the next one's deltas.
    class StatisticsThread
      # Thread#name of the thread.
      NAME = "sluice.statistics"

      @lock = Mutex.new

      class << self
        # The process's instance (a forked child gets its own: the parent's thread is not there).
        def instance
          @lock.synchronize do
            @instance = new if @instance.nil? || @pid != Process.pid
            @pid = Process.pid
            @instance
          end
        end
      end

      def initialize
        @lock = Mutex.new
        @arrived = ConditionVariable.new
        @waiting = {} # client => its latest JSON not parsed yet, oldest client first
        @thread = nil
      end

      # Queues a client's emission: client.announce_statistics(json) runs on this thread.
      # @param client [#announce_statistics]
      # @param json [String]
      def push(client, json)
        @lock.synchronize do
          @waiting.delete(client) # the newest replaces it, and goes to the back
          @waiting[client] = json
          @thread ||= start
          @arrived.signal
        end
      end

      # A closed client's emission still waiting is dropped.
      def forget(client) = @lock.synchronize { @waiting.delete(client) }

      # Emissions waiting (for specs and benchmarks).
      def waiting = @lock.synchronize { @waiting.size }

      private

      def start
        Thread.new do
          Thread.current.name = NAME
          # A polling thread as far as listeners go: one that raises (anything) is reported, the thread goes on.
          Thread.current.thread_variable_set(THREAD_KEY, self)
          Thread.current.report_on_exception = false
          # A thread inherits its creator's interrupt masks: the poller's
          # (Object => :never while it dispatches) would make it unkillable, and
          # the process could not exit.
          Thread.handle_interrupt(Object => :immediate) { loop { announce_next } }
        end
      end

      def announce_next
        client, json = @lock.synchronize do
          @arrived.wait(@lock) while @waiting.empty?
          @waiting.shift
        end
        client.announce_statistics(json)
      end
    end
  end
end
