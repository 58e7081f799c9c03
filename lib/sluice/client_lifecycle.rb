# frozen_string_literal: true

module Sluice
  # The life of every kind of client (Producer, Consumer, Admin), in one
  # place: its settings, id, monitor and poller; connecting the native
  # client and registering it with the poller; the OAUTHBEARER answers;
  # closing from a signal handler or at exit; and one state machine:
  #
  #   :initial --connect--> :connected --close--> :closing --> :closed
  #
  # (A producer whose client could not be rebuilt after a fatal error goes
  # straight to :closed.) Each kind adds only its hooks: which native client
  # it builds (#native_class), what it attaches before and after
  # registration (#attach, #connected), what it releases first when
  # disconnecting (#detach) and how it shuts down (its own #close, which runs
  # #close_under_lock).
  module ClientLifecycle
    # How long a close started from a signal handler is waited for there
    # beyond its own timeout; after that it finishes in the background.
    TRAP_GRACE = 10 # s
    # The notifier of clients without delivery handles (consumers, admins).
    NO_WAITERS = Object.new.tap { |o| o.define_singleton_method(:notify) { nil } }.freeze

    # The settings (frozen; a producer's reload may replace them), the id and the monitor.
    attr_reader :id, :config, :monitor

    # :initial (no native client yet), :connected, :closing (close under way)
    # or :closed. Read without a lock: a state another thread is changing
    # reads as the one before or the one after.
    attr_reader :status

    # @return [Boolean] #close finished
    def closed? = @status == :closed

    # Answers an `oauthbearer.token_refresh` event (event[:bearer] is this
    # client). Works inside new too, where the first refresh may be served.
    # @raise [KafkaError] librdkafka refused the token
    # @raise [Errors::ProducerClosedError, Errors::ConsumerClosedError, Errors::AdminClosedError] the client is closed
    # @param token [String] the token
    # @param lifetime_ms [Integer] when it expires, in ms since the epoch
    # @param principal_name [String]
    # @param extensions [Hash{#to_s => #to_s}] SASL extensions
    # @return [nil]
    # @example
    #   producer.monitor.subscribe("oauthbearer.token_refresh") do |event|
    #     token = fetch_token # your identity provider
    #     event[:bearer].oauthbearer_set_token(token: token.value, lifetime_ms: token.expires_at_ms, principal_name: "svc")
    #   end
    def oauthbearer_set_token(token:, lifetime_ms:, principal_name:, extensions: {})
      error = token_state.oauthbearer_set_token(token, lifetime_ms, principal_name, extensions.flat_map { |k, v| [k.to_s, v.to_s] })
      raise KafkaError.new(*error) if error
    end

    # Answers an `oauthbearer.token_refresh` event with a failure: librdkafka
    # reports it and asks again later.
    # @param reason [#to_s] what went wrong, for librdkafka's log and error report
    # @return [nil]
    # @raise [Errors::ProducerClosedError, Errors::ConsumerClosedError, Errors::AdminClosedError] the client is closed
    def oauthbearer_set_token_failure(reason)
      token_state.oauthbearer_set_token_failure(reason.to_s)
      nil
    end

    # Shutdown's at_exit hook.
    # @api private
    # @return [nil]
    def close_at_exit = close

    private

    # What every client keeps of the settings filled in its new's block
    # (validated and frozen first): id, monitor, poller, and its state.
    def configure(config)
      yield config if block_given?
      @config = config.validate!.freeze
      @id = @config.id
      @monitor = @config.monitor || Monitor.new(logger: @config.logger)
      @poller = @config.polling.mode == :thread ? Polling::PollThread.new : (@config.polling.poller || Polling::Poller.instance)
      @lifecycle = Mutex.new
      @status = :initial
    end

    # Builds the native client and registers it with the poller; nothing
    # native is left behind when that fails or is interrupted.
    def connect
      client = Secrets.scrubbing(@config.kafka) { native_class.new(@config.kafka_pairs) }
      state = Polling::PolledClient.new(kind: kind, client_id: @id, client: client, monitor: @monitor, logger: @config.logger,
                                        max_time: @config.polling.fd.max_time, bearer: self,
                                        periodic_poll_interval: @config.polling.fd.periodic_poll_interval, **polled_options)
      @token_state = state # before register: the first token refresh may be answered inside it
      attach(client, state)
      @poller.register(state)
      connected(client, state)
      @status = :connected
      instrument_lifecycle("connected")
    rescue Exception # rubocop:disable Lint/RescueException -- interrupted too: nothing native may leak
      @poller.unregister(state) if state
      client&.destroy
      raise
    end

    # Stops polling the client and destroys it; runs to the end whatever
    # interrupt arrives meanwhile.
    # @param destroy_args what the native #destroy takes (a consumer's timeout)
    def disconnect(state = @state, client = @client, *destroy_args)
      Thread.handle_interrupt(Object => :never) do
        detach
        @poller.unregister(state)
        Blocking.call(interruptible: false) { client.destroy(*destroy_args) }
        yield if block_given?
      end
    end

    # The state machine's close: :closing while the block runs (under the
    # lifecycle lock, so one close at a time), then :closed, untracked from
    # Shutdown and instrumented. A no-op once closed.
    # @return [Boolean] this call closed the client
    def close_under_lock
      @lifecycle.synchronize do
        return false if closed?

        @status = :closing
        instrument_lifecycle("closing")
        yield
        @status = :closed
        Shutdown.untrack(self)
      end
      instrument_lifecycle("closed")
      true
    end

    # Closed from the moment close began: calls of other threads are refused.
    def closing_or_closed? = @status == :closing || @status == :closed

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

    # The poll state that answers token refreshes: the newest one, even while
    # connect has not finished (the first refresh may come inside it).
    def token_state
      raise closed_error, "#{kind} #{@id} is closed" if closed?

      @token_state
    end

    def instrument_lifecycle(what) = @monitor.instrument("#{kind}.#{what}", "#{kind}_id": @id)

    # Hooks of each kind, with what most kinds do.

    # What PolledClient.new takes besides the common settings.
    def polled_options = { notifier: NO_WAITERS }

    # Before the poller registers the state (its first poll may follow at once).
    def attach(_client, _state) = nil

    # After registration: what the kind keeps of its client.
    def connected(client, state)
      @client = client
      @state = state
    end

    # First thing disconnect does, before polling stops.
    def detach = nil
  end
end
