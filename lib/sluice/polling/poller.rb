# frozen_string_literal: true

module Sluice
  module Polling
    # One Ruby thread that polls many clients.
    #
    # Each client's main queue writes a byte to its own pipe when it goes from
    # empty to non-empty. The poller waits on all pipes at once in a native
    # selector (GVL released only while waiting), then serves each ready client
    # (PolledClient#serve: drain and dispatch) for at most its max_time; a client with
    # events left is re-signalled so the others get their turn. A client whose
    # pipe stayed silent for a whole periodic_poll_interval is polled anyway:
    # a Schedule (min-heap) says when the next one is due, and that wake-up also
    # serves every client due within a batch window, so 1,000 idle clients cost
    # a few wake-ups a second, not one each.
    #
    # Faults stay with the client that caused them: one whose serve raises is
    # reported and set aside for a backoff, the others are served as usual.
    #
    # Registration changes go through a command list that the poller thread
    # applies between waits, so only that thread touches the selector's set and
    # fires the poller.* events. The thread starts with the first client and
    # stops after the last one leaves.
    class Poller
      include Shared::Clock

      # Longest pause (s) of a client (or the poller) whose serving raised, growing from 20 ms with each failure in a row.
      MAX_BACKOFF = 1.0
      # Longest time (s) between two periodic polls when no client asks for sooner.
      DEFAULT_PERIOD = 1.0
      # Longest time (s) a periodic poll runs ahead of a client's due time, so
      # one wake-up serves the clients due close together (at most a quarter
      # of the client's own interval, which keeps short intervals honest).
      BATCH_WINDOW = 0.25
      # Interrupts reach the thread while it waits (allocated once, not every turn).
      WAIT_INTERRUPTS = { Object => :immediate }.freeze

      @instance_mutex = Mutex.new
      @ids = 0

      class << self
        # The global poller (id 0), used by clients whose config.polling.poller is nil.
        def instance
          @instance_mutex.synchronize do
            @instance = nil if @instance&.forked?
            @instance ||= new(id: 0)
          end
        end

        # A new poller's id (the shared instance is 0).
        # @api private
        def next_id = @instance_mutex.synchronize { @ids += 1 }
      end

      attr_reader :id

      def initialize(id: self.class.next_id)
        @id = id
        reset
      end

      # Clients registered (or about to be). In a forked child: none (the
      # parent's clients cannot be served there).
      def count = forked? ? 0 : @mutex.synchronize { @count }

      def alive? = !forked? && @mutex.synchronize { !@thread.nil? && @thread.alive? }

      def in_poller_thread? = Thread.current.thread_variable_get(THREAD_KEY).equal?(self)

      # Counters since the poller was created: waits that returned, clients
      # served after a wake-up, drains re-armed because max_time ran out, and
      # periodic polls.
      def stats = if forked?
                    { waits: 0, wakeups: 0, rearms: 0,
                      periodic_polls: 0 }
                  else
                    { waits: @waits, wakeups: @wakeups, rearms: @rearms, periodic_polls: @periodic_polls }
                  end

      # Returns once the poller serves the client's state. (A
      # poller thread that is stopping hands the registration to its successor.)
      # @raise what adding it to the selector raised (then it is not registered)
      # @api private
      def register(state)
        reset if forked?
        state.client.wakeup_enable
        if in_poller_thread? && owner? # a callback registers: waiting for ourselves would never end
          @mutex.synchronize { @count += 1 }
          add(state)
        else
          latch = Queue.new
          command(:register, state, latch)
          error = latch.pop
          raise error if error
        end
      end

      # Returns once every event of the client was dispatched
      # and the poller has let go of it; then the pipe is closed, and a token
      # refresh still running is waited for (bounded). Idempotent.
      # A poller thread that is gone (killed, or process teardown after at_exit)
      # cannot do it: then the caller does it.
      # @api private
      def unregister(state)
        unless state.closed?
          @mutex.synchronize { @count -= 1 } if state.leave! # counted once, however often close is retried
          if in_poller_thread? || !thread_alive?
            remove(state, nil)
          else
            latch = Queue.new
            command(:unregister, state, latch)
            stopped_thread = latch.pop
            stopped_thread&.join
          end
        end
        state.client.wakeup_disable
        state.await_refresh
      end

      # @api private
      def forked? = @pid != Process.pid

      private

      def reset
        @selector&.close if forked? # our copy only: the epoll set is shared with the parent
        @pid = Process.pid
        @mutex = Mutex.new
        @selector = Native::Selector.new
        @states = {}.freeze # token -> PolledClient, copy-on-write: iterated while commands arrive
        @suspended = {} # token -> when to serve it again (poller thread only)
        @strikes = {} # token -> failures in a row
        @commands = []
        @count = 0
        @thread = nil
        @next_token = 0
        @schedule = Schedule.new
        @next_periodic = now + DEFAULT_PERIOD
        @failures = 0
        @waits = @wakeups = @rearms = @periodic_polls = 0
      end

      def thread_alive? = @mutex.synchronize { @thread&.alive? }

      def command(name, state, latch)
        @mutex.synchronize do
          @count += 1 if name == :register # counted now: an arrival keeps a leaving last client from stopping us
          @commands << [name, state, latch]
          @thread = start_thread unless @thread&.alive?
        end
        @selector.wakeup
      end

      def start_thread
        thread = Thread.new { run }
        thread.name = "sluice.poller##{@id}"
        thread.priority = Polling.thread_priority
        thread.report_on_exception = false
        thread
      end

      # An interrupt (Thread#raise, #kill) reaches the thread only while it
      # waits, or inside a listener (Monitor#notify): never halfway through a
      # drain or a dispatch, where a delivery report could be skipped.
      def run
        Thread.current.thread_variable_set(THREAD_KEY, self)
        Thread.handle_interrupt(Object => :never) { iterate until stopping? }
      end

      def iterate
        ready = Thread.handle_interrupt(WAIT_INTERRUPTS) { @selector.wait(wait_timeout) }
        @waits += 1
        @wakeups += ready.size
        ready.each { |token| serve(@states[token]) }
        # A callback may have closed our last client inline, handing the
        # poller over to a successor thread: from then on everything is its job.
        return unless owner?

        run_commands
        resume_suspended unless @suspended.empty?
        periodic_poll if owner? && now >= @next_periodic
        @failures = 0
      rescue StandardError, ScriptError => e
        recover(e)
      end

      def serve(state, periodic: false)
        # A thread that was told to stop (inline unregister of the last
        # client) must not serve clients a successor thread now owns.
        return unless state && owner?

        left = periodic ? state.poll : state.serve
        @strikes.delete(state.token) unless @strikes.empty?
        return unless left

        @rearms += 1
        state.client.wakeup_signal
      rescue StandardError, ScriptError => e
        suspend(state, e)
      end

      # Clients whose pipe stayed silent still get polled: OAuth refresh and
      # anything else that does not wake us must not starve. One that was just
      # served (say it spent its whole max_time) is not due yet: its entry goes
      # back for when it is. Only clients due within the batch window are
      # looked at; the rest of the heap is untouched.
      def periodic_poll
        @periodic_polls += 1
        at = now
        @schedule.pop_until(at + BATCH_WINDOW) { |_, token| poll_due(token, at) }
        first = @schedule.first_at
        @next_periodic = first && first < at + DEFAULT_PERIOD ? first : at + DEFAULT_PERIOD
      end

      def poll_due(token, time)
        state = @states[token]
        return if state.nil? || state.closed? # gone: its entry goes with it

        if (retry_at = @suspended[token])
          @schedule.push(retry_at, token) # resume_suspended serves it then
        else
          serve(state, periodic: true) if state.next_poll_at - time <= batch_window(state)
          @schedule.push(state.next_poll_at, token)
        end
      end

      def batch_window(state) = [BATCH_WINDOW, state.periodic_poll_interval / 4000.0].min

      def wait_timeout
        wake_at = @suspended.empty? ? @next_periodic : [@next_periodic, @suspended.each_value.min].min
        [((wake_at - now) * 1000).ceil, 0].max
      end

      # A client whose serve raised: reported, and out of the selector for a
      # backoff, so its (still readable) pipe cannot keep the poller spinning.
      def suspend(state, error)
        strikes = @strikes[state.token] = @strikes.fetch(state.token, 0) + 1
        @suspended[state.token] = now + [0.01 * (2**strikes), MAX_BACKOFF].min
        @selector.remove(state.wakeup_fd)
        state.instrument("error.occurred", type: "poller.error", error: error, poller_id: @id)
      rescue StandardError, ScriptError
        nil # reporting failed too; the backoff still applies
      end

      def resume_suspended
        at = now
        due = @suspended.select { |_, retry_at| retry_at <= at }.keys
        due.each do |token|
          @suspended.delete(token)
          next unless (state = @states[token])

          @selector.add(state.wakeup_fd, token)
          serve(state)
        end
      end

      def owner? = @thread.equal?(Thread.current)

      # Only the owning thread applies commands, so every client is added by
      # the thread that will serve it. Each command runs on its own: one that
      # fails never drops the others, and every caller waiting on a latch gets
      # an answer.
      def run_commands
        commands = @mutex.synchronize { @commands.empty? || !owner? ? nil : @commands.slice!(0..) }
        commands&.each { |name, state, latch| name == :register ? add(state, latch) : remove(state, latch) }
      end

      def add(state, latch = nil)
        token = (@next_token += 1)
        state.token = token
        @selector.add(state.wakeup_fd, token)
        @states = @states.merge(token => state).freeze
        @schedule.push(state.next_poll_at, token)
        @next_periodic = [@next_periodic, state.next_poll_at].min # a shorter interval applies at once
        latch&.push(nil)
        state.instrument("poller.#{state.kind}_registered", poller_id: @id)
        serve(state) # events queued before the pipe existed gave no wake-up
      rescue StandardError, ScriptError => e
        @mutex.synchronize { @count -= 1 }
        state.leave!
        state.close! # never served: unregistering it is a no-op
        raise unless latch

        latch.push(e)
      end

      def remove(state, latch)
        return if state.closed?

        @selector.remove(state.wakeup_fd) unless @suspended.delete(state.token)
        @strikes.delete(state.token)
        dispatch_rest(state)
        @states = @states.reject { |token, _| token == state.token }.freeze
        state.instrument("poller.#{state.kind}_unregistered", poller_id: @id)
      ensure
        stopping = stop_if_idle
        latch&.push(stopping ? Thread.current : nil)
      end

      # What is still queued is dispatched before the client goes; whatever
      # fails, the state is closed so nothing serves it again.
      def dispatch_rest(state)
        state.drain_all
      rescue StandardError, ScriptError => e
        state.instrument("error.occurred", type: "poller.error", error: e, poller_id: @id)
      ensure
        state.close!
      end

      # The loop ends when no client is left and none is on its way.
      def stopping? = @mutex.synchronize { @thread.nil? || !@thread.equal?(Thread.current) }

      # `@count` already includes registrations still queued or in the batch being
      # applied, so a client arriving while the last one leaves keeps us running.
      # An unregistration counts down before it is queued: one queued while an
      # earlier one was being applied keeps us running too, or its close would
      # wait on its latch forever (CI's cluster run once hung so: a producer's
      # and a consumer's close ending together).
      def stop_if_idle
        @mutex.synchronize do
          return false unless @count.zero? && @commands.empty? && @thread.equal?(Thread.current)

          @thread = nil
          true
        end
      end

      def recover(error)
        @failures += 1
        @states.each_value { |state| state.instrument("error.occurred", type: "poller.error", error: error, poller_id: @id) }
        sleep([0.01 * (2**@failures), MAX_BACKOFF].min)
      end
    end
  end
end
