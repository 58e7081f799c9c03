# frozen_string_literal: true

module Sluice
  module Polling
    # Runs one client's OAUTHBEARER token refreshes off its polling thread.
    #
    # A refresh is a network call (a token endpoint, STS, instance metadata)
    # or whatever an application's listener does; on the shared poller, a
    # token endpoint that accepted and never answered held up every other
    # client's deliveries for seconds (issue 53). librdkafka takes the answer
    # (rd_kafka_oauthbearer_set_token[_failure]) from any thread, so the
    # poller only kicks this thread and goes on. In :thread mode too: there a
    # hung refresh would stall the client's own deliveries, which its current
    # token (refreshed at 80% of its lifetime) still authenticates.
    #
    # One thread per client, alive only while a refresh runs (librdkafka asks
    # again only once answered, so a client has at most one): a thousand idle
    # clients keep no thread. Its only owner is its client: #stop at close
    # ends it, and waits for it at most STOP_WAIT, so a hung endpoint never
    # holds a close.
    class RefreshThread
      # Longest wait (s) for a stopped refresh to end (a listener that masks interrupts).
      STOP_WAIT = 1.0

      # @param name [String] Thread#name of the thread
      # @param work [#call] the refresh, run on the thread once per #kick
      def initialize(name, &work)
        @name = name
        @work = work
        @lock = Mutex.new
        @thread = nil
        @due = false
        @stopped = false
      end

      # Has the work run on the thread: at once, or after the run under way.
      def kick
        @lock.synchronize do
          return if @stopped

          @due = true
          @thread ||= start
        end
      end

      # No more runs; one under way is ended (Thread#kill: its client is
      # closing, so its answer could only be refused). Returns at once: the
      # poller calls it, and #join is for the closing caller.
      def stop
        thread = @lock.synchronize do
          @stopped = true
          @thread
        end
        thread.kill unless thread.nil? || thread.equal?(Thread.current)
        nil
      end

      # Waits for a stopped run to end, at most STOP_WAIT; at once from the
      # thread itself (a listener closing its client).
      def join
        thread = @lock.synchronize { @thread }
        thread.join(STOP_WAIT) unless thread.nil? || thread.equal?(Thread.current)
        nil
      end

      # A run is under way or due (for specs).
      def busy? = @lock.synchronize { !@thread.nil? }

      private

      def start
        Thread.new do
          Thread.current.name = @name
          # A polling thread as far as listeners go: one that raises (anything) is reported, the thread goes on.
          Thread.current.thread_variable_set(THREAD_KEY, self)
          Thread.current.report_on_exception = false
          # Not the poller's mask (Object => :never while it dispatches), or #stop could not end it.
          Thread.handle_interrupt(Object => :immediate) { run }
        end
      end

      # Work that raised ends the thread: the next kick starts another.
      def run
        @work.call while due?
      ensure
        @lock.synchronize { @thread = nil if @thread.equal?(Thread.current) }
      end

      # Taken under the lock with the decision to end, so a kick never finds
      # a thread that is about to end without running it.
      def due?
        @lock.synchronize do
          due = @due && !@stopped
          @due = false
          @thread = nil unless due
          due
        end
      end
    end
  end
end
