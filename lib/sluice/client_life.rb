# frozen_string_literal: true

module Sluice
  # The life of one client (Producer, Consumer or Admin), as an object of its
  # own: the only holder of its status, its lifecycle lock, its settings (a
  # producer's reload may replace them), its native client and that client's
  # poll state (Polling::PolledClient), and the deadline of its close. It
  # connects and disconnects the native client, tracks the client in Shutdown
  # until it is closed, and runs the close paths every kind shares: the close
  # under the lock, the close a signal handler starts on a thread of its own.
  # One state machine:
  #
  #   :initial --connect--> :connected --close--> :closing --> :closed
  #
  # (A producer whose client could not be rebuilt after a fatal error is
  # #lost!; a consumer in a forked child #forgotten!: both straight to :closed.)
  #
  # The client is the hooks receiver (ClientHooks has the defaults): which
  # native client it builds (#native_class), what it attaches before and
  # after registration (#attach, #connected: it yields when the new native
  # client may be used, and #client returns it from then), what it releases first when
  # disconnecting (#detach), what PolledClient.new takes besides the common
  # settings (#polled_options) and the error of a closed client
  # (#closed_error). The hooks are the client's private methods: called with
  # __send__, they stay out of its public API.
  # @api private
  class ClientLife
    include Clock

    # How long a close started from a signal handler is waited for there
    # beyond its own timeout; after that it finishes in the background.
    TRAP_GRACE = 10 # s

    # :initial (no native client yet), :connected, :closing (close under way)
    # or :closed. Read without the lock: a state another thread is changing
    # reads as the one before or the one after.
    attr_reader :status

    # The client's id, monitor, poller and settings (#reconfigure replaces them).
    attr_reader :id, :monitor, :poller, :config

    # The native client in use and its poll state (Polling::PolledClient): nil
    # before the first #connect; a reload's #connect replaces both.
    attr_reader :client, :state

    # The life of a client with these settings (validated and frozen): its
    # monitor is the settings' one or a new one, its poller the shared one or,
    # in :thread mode, a thread of its own.
    def self.for(owner, config, kind:)
      monitor = config.monitor || Monitor.new(logger: config.logger)
      poller = config.polling.mode == :thread ? Polling::PollThread.new : (config.polling.poller || Polling::Poller.instance)
      new(owner, kind: kind, id: config.id, monitor: monitor, poller: poller, config: config)
    end

    # @param owner [Producer, Consumer, Admin] the client: hooks receiver, Shutdown's entry, the token's bearer
    def initialize(owner, kind:, id:, monitor:, poller:, config:)
      @owner = owner
      @kind = kind
      @id = id
      @monitor = monitor
      @poller = poller
      @config = config
      @lock = Mutex.new
      @status = :initial
    end

    def connected? = @status == :connected

    def closed? = @status == :closed

    # Closed from the moment close began: calls of other threads are refused.
    def closing_or_closed? = @status == :closing || @status == :closed

    # A close runs on another thread (or a signal handler's) and waits for
    # this one: what this thread does for the client must let it finish.
    def closing_elsewhere? = closing_or_closed? && !@lock.owned?

    # The lock

    # One close, reload or other change of the native client at a time.
    def exclusively(&) = @lock.synchronize(&)

    # The current thread holds the lock: a callback of our own close, or the
    # code a signal interrupted was closing us.
    def held_by_current? = @lock.owned?

    # On the polling thread while another thread holds the lock: that holder
    # (a close) waits for this very thread, so nothing here may wait for it.
    def busy_on_poller? = @lock.locked? && @poller.in_poller_thread?

    # Waits until whoever holds the lock (a reload) is done; never on the
    # polling thread or under the lock itself, which would wait for itself.
    def wait_for_holder
      @lock.synchronize {} unless @lock.owned? || @poller.in_poller_thread?
      nil
    end

    # Connecting and disconnecting

    # #connect, then tracked by Shutdown until closed: what a client's new does.
    def open
      connect
      Shutdown.track(@owner)
    end

    # The settings the next #connect builds a client with (a producer's reload).
    def reconfigure(config) = @config = config

    # Builds the native client from #config and registers it with the poller;
    # nothing native is left behind when that fails or is interrupted.
    def connect
      config = @config
      client = Secrets.scrubbing(config.kafka) { hook(:native_class).new(config.kafka_pairs) }
      state = polled_client(config, client)
      @token_state = state # before register: the first token refresh may be answered inside it
      hook(:attach, client, state)
      @poller.register(state)
      hook(:connected, client, state) { publish(client, state) }
      @status = :connected
      instrument("connected")
    rescue Exception # rubocop:disable Lint/RescueException -- interrupted too: nothing native may leak
      @poller.unregister(state) if state
      client&.destroy
      raise
    end

    # Stops polling the client and destroys it; runs to the end whatever
    # interrupt arrives meanwhile. The block (after the destroy) gets the
    # client and its poll state.
    # @param destroy_args what the native #destroy takes (a consumer's timeout)
    def disconnect(*destroy_args)
      client = @client
      state = @state
      Thread.handle_interrupt(Object => :never) do
        hook(:detach)
        @poller.unregister(state)
        Blocking.call(interruptible: false) { client.destroy(*destroy_args).tap { @destroyed = true } }
        yield(client, state) if block_given?
      end
    end

    # The close's deadline

    # A close begins: timeout_ms (nil: no bound) from now is the deadline
    # every wait it can reach takes, on its own thread or another's (a
    # transaction being opened or ended, a concurrent read's running blocks),
    # so the close as a whole keeps its timeout. A later close keeps the first one's.
    # @return [Float, nil] the deadline (Clock#now), nil without one
    def begin_close(timeout_ms)
      @close_began ||= [now, timeout_ms]
      deadline
    end

    # When the close that began must be done, or (share below 1) when that
    # share of its timeout is spent. nil: no close began, or it has no bound.
    # @return [Float, nil] a Clock#now value
    def deadline(share = 1)
      began, timeout_ms = @close_began
      began + (timeout_ms * share / 1000.0) if timeout_ms
    end

    # A close gave up waiting and raised: the one made later starts its own deadline.
    def close_abandoned = @close_began = nil

    # How long (ms) one wait may take: cap, or less once a close began whose
    # deadline comes first (at least 1: librdkafka takes 0 as "no wait").
    def wait_ms(cap)
      limit = deadline
      limit ? [ms_until(limit), cap].min.clamp(1, nil) : cap
    end

    # The close paths

    # :closing while the block runs (under the lock, so one close at a time),
    # then :closed, untracked from Shutdown and instrumented. A no-op once closed.
    # @return [Boolean] this call closed the client
    def close_under_lock
      @lock.synchronize do
        return false if closed?

        @status = :closing
        @destroyed = false
        instrument("closing")
        begin
          yield
        rescue Exception # rubocop:disable Lint/RescueException -- see below
          # A Task#stop (Fiber#raise: no mask holds it off) after the destroy: the client is gone all the same.
          lost! if @destroyed
          raise
        end
        @status = :closed
        Shutdown.untrack(@owner)
      end
      instrument("closed")
      true
    end

    # A signal handler may not lock a Mutex, and the code it interrupted may
    # hold one that close needs: the close runs on a thread of its own,
    # waited for here (timeout_ms + TRAP_GRACE). If it still runs when the
    # handler returns, it finishes once the interrupted code goes on, or in
    # the at_exit hook. No logging here: Logger locks a Mutex.
    def close_on_own_thread(timeout_ms, &close)
      closer = Thread.new(&close)
      closer.name = "sluice.close##{@id}"
      closer.report_on_exception = false
      closer.join((timeout_ms / 1000.0) + TRAP_GRACE)
      nil
    end

    # No native client left for the owner: a producer's client could not be
    # rebuilt after a fatal error (under the lock), or, as #forgotten!, a
    # consumer in a forked child stops using the parent's (the caller
    # announces it). Straight to :closed; the owner cannot go on.
    def lost!
      @status = :closed
      Shutdown.untrack(@owner)
    end
    alias forgotten! lost!

    # The client's answer to an `oauthbearer.token_refresh` event (see
    # ClientHooks#oauthbearer_set_token): given to the newest poll state, even
    # while connect has not finished (the first refresh may come inside it).
    def answer_token(token, lifetime_ms, principal_name, extensions)
      error = token_state.oauthbearer_set_token(token, lifetime_ms, principal_name, extensions.flat_map { |k, v| [k.to_s, v.to_s] })
      raise KafkaError.new(*error) if error
    end

    # (see ClientHooks#oauthbearer_set_token_failure)
    def answer_token_failure(reason)
      token_state.oauthbearer_set_token_failure(reason.to_s)
      nil
    end

    private

    def token_state
      raise hook(:closed_error), "#{@kind} #{@id} is closed" if closed?

      @token_state
    end

    # Under the connected hook's lock, if it has one (a producer's topic settings must reach the new client first).
    def publish(client, state)
      @client = client
      @state = state
    end

    def hook(name, *args, &) = @owner.__send__(name, *args, &)

    def polled_client(config, client)
      Polling::PolledClient.new(kind: @kind, client_id: @id, client: client, monitor: @monitor, logger: config.logger,
                                max_time: config.polling.fd.max_time, bearer: @owner,
                                periodic_poll_interval: config.polling.fd.periodic_poll_interval, **hook(:polled_options))
    end

    def instrument(what) = @monitor.instrument("#{@kind}.#{what}", "#{@kind}_id": @id)
  end
end
