# frozen_string_literal: true

module Sluice
  module Polling
    # One Ruby thread that polls many producers.
    #
    # Each producer's main queue writes a byte to its own pipe when it goes from
    # empty to non-empty. The poller waits on all pipes at once in a native
    # epoll selector (GVL released only while waiting), then drains each ready
    # producer with non-blocking polls (GVL kept) for at most its max_time; a
    # producer with events left is re-signalled so the others get their turn.
    # Every producer is also polled every periodic_poll_interval, pipe or not.
    #
    # Registration changes go through a command list that the poller thread
    # applies between waits, so only that thread touches the selector's set and
    # fires the poller.* events. The thread starts with the first producer and
    # stops after the last one leaves.
    class Poller
      THREAD_KEY = :sluice_poller
      MAX_BACKOFF = 1.0

      @instance_mutex = Mutex.new
      @ids = 0

      class << self
        # The global poller (id 0), used by producers whose config.polling.poller is nil.
        def instance
          @instance_mutex.synchronize do
            @instance = nil if @instance&.forked?
            @instance ||= new(id: 0)
          end
        end

        # @api private
        def next_id = @instance_mutex.synchronize { @ids += 1 }
      end

      attr_reader :id

      def initialize(id: self.class.next_id)
        @id = id
        reset
      end

      # Producers registered (or about to be). In a forked child: none (the
      # parent's producers cannot be served there).
      def count = forked? ? 0 : @mutex.synchronize { @count }

      def alive? = !forked? && @mutex.synchronize { !@thread.nil? && @thread.alive? }

      def in_poller_thread? = Thread.current.thread_variable_get(THREAD_KEY).equal?(self)

      # Counters since the poller was created: waits that returned, producers
      # served after a wake-up, drains re-armed because max_time ran out, and
      # periodic polls of every producer.
      def stats = if forked?
                    { waits: 0, wakeups: 0, rearms: 0,
                      periodic_polls: 0 }
                  else
                    { waits: @waits, wakeups: @wakeups, rearms: @rearms, periodic_polls: @periodic_polls }
                  end

      # @api private — Producer calls this with its poll state.
      def register(state)
        reset if forked?
        state.client.wakeup_enable
        command(:register, state)
        nil
      end

      # @api private — returns once every event of the producer was dispatched
      # and the poller has let go of it; then the pipe is closed.
      def unregister(state)
        if in_poller_thread?
          @mutex.synchronize { @count -= 1 }
          remove(state, nil)
        else
          latch = Queue.new
          command(:unregister, state, latch)
          stopped_thread = latch.pop
          stopped_thread&.join
        end
        state.client.wakeup_disable
      end

      # @api private
      def forked? = @pid != Process.pid

      private

      def reset
        @selector&.close if forked? # our copy only: the epoll set is shared with the parent
        @pid = Process.pid
        @mutex = Mutex.new
        @selector = Native::Selector.new
        @states = {}.freeze # token -> State, copy-on-write: iterated while commands arrive
        @commands = []
        @count = 0
        @thread = nil
        @next_token = 0
        @next_periodic = now
        @failures = 0
        @waits = @wakeups = @rearms = @periodic_polls = 0
      end

      def command(name, state, latch = nil)
        @mutex.synchronize do
          @count += name == :register ? 1 : -1
          @commands << [name, state, latch]
          @thread = start_thread unless @thread&.alive?
        end
        @selector.wakeup
      end

      def start_thread
        thread = Thread.new { run }
        thread.name = "sluice.poller##{@id}"
        thread.report_on_exception = false
        thread
      end

      def run
        Thread.current.thread_variable_set(THREAD_KEY, self)
        iterate until stopping?
      end

      def iterate
        ready = @selector.wait(wait_timeout)
        @waits += 1
        @wakeups += ready.size
        ready.each { |token| serve(@states[token]) }
        # A callback may have closed our last producer inline, handing the
        # poller over to a successor thread: from then on everything is its job.
        return unless owner?

        run_commands
        periodic_poll if owner? && now >= @next_periodic
        @failures = 0
      rescue StandardError, ScriptError => e
        recover(e)
      end

      def serve(state)
        # A thread that was told to stop (inline unregister of the last
        # producer) must not serve producers a successor thread now owns.
        return unless state && owner?

        return unless state.serve

        @rearms += 1
        state.client.wakeup_signal
      end

      # Producers that wrote nothing to their pipe still get polled: OAuth
      # refresh and anything else that does not wake us must not starve.
      def periodic_poll
        @periodic_polls += 1
        @states.each_value { |state| serve(state) }
        @next_periodic = now + (@periodic_interval || 1.0)
      end

      def wait_timeout
        [((@next_periodic - now) * 1000).ceil, 0].max
      end

      def owner? = @thread.equal?(Thread.current)

      # Only the owning thread applies commands, so every producer is added by
      # the thread that will serve it.
      def run_commands
        commands = @mutex.synchronize { @commands.empty? || !owner? ? nil : @commands.slice!(0..) }
        commands&.each { |name, state, latch| name == :register ? add(state) : remove(state, latch) }
      end

      def add(state)
        token = (@next_token += 1)
        state.token = token
        @states = @states.merge(token => state).freeze
        @selector.add(state.wakeup_fd, token)
        interval = state_interval(state)
        @periodic_interval = [@periodic_interval || interval, interval].min
        @next_periodic = [@next_periodic, now + interval].min # a shorter interval applies at once
        state.instrument("poller.producer_registered", poller_id: @id)
        serve(state) # events queued before the pipe existed gave no wake-up
      end

      def remove(state, latch)
        @selector.remove(state.wakeup_fd)
        state.drain_all
        state.close!
        @states = @states.reject { |token, _| token == state.token }.freeze
        @periodic_interval = @states.values.map { |s| state_interval(s) }.min
        state.instrument("poller.producer_unregistered", poller_id: @id)
      ensure
        stopping = stop_if_idle
        latch&.push(stopping ? Thread.current : nil)
      end

      def state_interval(state) = state.periodic_poll_interval / 1000.0

      # The loop ends when no producer is left and none is on its way.
      def stopping? = @mutex.synchronize { @thread.nil? || !@thread.equal?(Thread.current) }

      # @count already includes registrations still queued or in the batch being
      # applied, so a producer arriving while the last one leaves keeps us running.
      def stop_if_idle
        @mutex.synchronize do
          return false unless @count.zero? && @thread.equal?(Thread.current)

          @thread = nil
          true
        end
      end

      def recover(error)
        @failures += 1
        @states.each_value { |state| state.instrument("error.occurred", type: "poller.error", error: error, poller_id: @id) }
        sleep([0.01 * (2**@failures), MAX_BACKOFF].min)
      end

      def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end
