# frozen_string_literal: true

module Sluice
  module Polling
    # :thread mode — the classic design: one Ruby thread per producer, blocked
    # in a GVL-released poll of its queue, draining with the GVL once events
    # arrive. Same interface as Poller, so the producer does not care which.
    class PollThread
      THREAD_KEY = :sluice_poll_thread
      # How long one blocking poll lasts; closing interrupts it at once.
      WAIT_MS = 1_000
      MAX_BACKOFF = 1.0

      def initialize
        @thread = nil
        @state = nil
        @running = false
      end

      def count = @state ? 1 : 0

      def alive? = !@thread.nil? && @thread.alive?

      def in_poller_thread? = Thread.current.thread_variable_get(THREAD_KEY).equal?(self)

      # @api private
      def register(state)
        @state = state
        @running = true
        @thread = Thread.new { run }
        @thread.name = "sluice.producer##{state.producer_id}"
        @thread.report_on_exception = false
      end

      # @api private — stops and joins the thread, then dispatches what is left.
      def unregister(state)
        @running = false
        if in_poller_thread?
          state.drain_all
        else
          state.client.interrupt_wait
          @thread.join
        end
        state.close!
      end

      private

      def run
        Thread.current.thread_variable_set(THREAD_KEY, self)
        @state.instrument("poller.producer_registered", poller_id: nil)
        failures = 0
        while @running
          begin
            # serve first: a turn cut short by max_time left a backlog to finish
            @state.client.wait_events(WAIT_MS) if !@state.serve && @running
            failures = 0
          rescue StandardError, ScriptError => e
            failures += 1
            @state.instrument("error.occurred", type: "poller.error", error: e)
            sleep([0.01 * (2**failures), MAX_BACKOFF].min)
          end
        end
        @state.drain_all unless @state.closed?
        @state.instrument("poller.producer_unregistered", poller_id: nil)
      end
    end
  end
end
