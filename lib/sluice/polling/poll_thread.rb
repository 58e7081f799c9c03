# frozen_string_literal: true

module Sluice
  module Polling
    # :thread mode — the classic design: one Ruby thread per client, blocked
    # in a GVL-released poll of its queue, draining with the GVL once events
    # arrive. Same interface as Poller, so the client does not care which.
    class PollThread
      # How long one blocking poll lasts; closing interrupts it at once.
      WAIT_MS = 1_000
      # Longest pause (s) after serve raised, growing from 20 ms with each failure in a row.
      MAX_BACKOFF = 1.0

      def initialize
        @thread = nil
        @state = nil
        @running = false
      end

      # Clients served: 1 while its client is open (Poller's interface).
      def count = @state && !@state.closed? ? 1 : 0

      def alive? = !@thread.nil? && @thread.alive?

      def in_poller_thread? = Thread.current.thread_variable_get(THREAD_KEY).equal?(self)

      # Starts the thread serving state (a reloaded client
      # registers its new state on the same PollThread).
      # @api private
      def register(state)
        @state = state
        @running = true
        @thread = Thread.new { run(state) }
        @thread.name = "sluice.#{state.kind}##{state.client_id}"
        @thread.priority = Polling.thread_priority
        @thread.report_on_exception = false
      end

      # Stops and joins the thread, then dispatches what is left, and waits
      # (bounded) for a token refresh still running. Idempotent; works when
      # the thread is already gone.
      # @api private
      def unregister(state)
        return if state.closed?

        @running = false
        if in_poller_thread? || !alive?
          finish(state)
        else
          state.client.interrupt_wait
          @thread.join
        end
        state.await_refresh
      end

      private

      # Interrupts reach the thread only while it waits or inside a listener
      # (see Poller#run).
      def run(state)
        Thread.current.thread_variable_set(THREAD_KEY, self)
        Thread.handle_interrupt(Object => :never) { serve_until_stopped(state) }
      end

      def serve_until_stopped(state)
        state.instrument("poller.#{state.kind}_registered", poller_id: nil)
        failures = 0
        while @running
          begin
            # serve first: a turn cut short by max_time left a backlog to finish
            wait(state) if !state.serve && @running
            failures = 0
          rescue StandardError, ScriptError => e
            failures += 1
            state.instrument("error.occurred", type: "poller.error", error: e)
            sleep([0.01 * (2**failures), MAX_BACKOFF].min)
          end
        end
        finish(state)
      end

      def wait(state) = Thread.handle_interrupt(Object => :immediate) { state.client.wait_events(WAIT_MS) }

      def finish(state)
        return if state.closed?

        begin
          state.drain_all
        rescue StandardError, ScriptError => e
          state.instrument("error.occurred", type: "poller.error", error: e)
        ensure
          state.close!
        end
        state.instrument("poller.#{state.kind}_unregistered", poller_id: nil)
      end
    end
  end
end
