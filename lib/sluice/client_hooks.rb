# frozen_string_literal: true

module Sluice
  # What a Consumer and an Admin show of their life, and the hooks their
  # ClientLife calls (a Producer has its own, on its own class). The life
  # itself (status, lock, settings, native client, connect and disconnect,
  # Shutdown tracking, the close paths) is the ClientLife object in @life,
  # built by #configure; this module only reads
  # it, answers the OAUTHBEARER refreshes through it, and gives the default
  # hooks: which native client a kind builds (#native_class), what it
  # attaches before and after registration (#attach, #connected), what it
  # releases first when disconnecting (#detach). Each kind adds its own in
  # its `lifecycle.rb`, with its #close, which runs ClientLife#close_under_lock.
  module ClientHooks
    # The notifier of clients without delivery handles (consumers, admins).
    NO_WAITERS = Object.new.tap { |o| o.define_singleton_method(:notify) { nil } }.freeze

    # The settings (frozen), the id and the monitor.
    attr_reader :id, :config, :monitor

    # @return [Symbol] :initial (no native client yet), :connected, :closing
    #   (close under way) or :closed. Read without a lock: a state another
    #   thread is changing reads as the one before or the one after.
    def status = @life.status

    # @return [Boolean] #close finished
    def closed? = @life.closed?

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
      @life.answer_token(token, lifetime_ms, principal_name, extensions)
    end

    # Answers an `oauthbearer.token_refresh` event with a failure: librdkafka
    # reports it and asks again later.
    # @param reason [#to_s] what went wrong, for librdkafka's log and error report
    # @return [nil]
    # @raise [Errors::ProducerClosedError, Errors::ConsumerClosedError, Errors::AdminClosedError] the client is closed
    def oauthbearer_set_token_failure(reason) = @life.answer_token_failure(reason)

    # Shutdown's at_exit hook.
    # @api private
    # @return [nil]
    def close_at_exit = close

    private

    # What every client keeps of the settings filled in its new's block
    # (validated and frozen first): id, monitor, poller, and its life.
    def configure(config)
      yield config if block_given?
      @life = ClientLife.for(self, config.validate!.freeze, kind: kind)
      @config = @life.config
      @id = @life.id
      @monitor = @life.monitor
      @poller = @life.poller
    end

    # Hooks of each kind, with what most kinds do (ClientLife calls them).

    # What PolledClient.new takes besides the common settings.
    def polled_options = { notifier: NO_WAITERS }

    # Before the poller registers the state (its first poll may follow at once).
    def attach(_client, _state) = nil

    # After registration: what the kind keeps of its client (a consumer's
    # and an admin's are never replaced); yields when the client may be used.
    def connected(client, state)
      @client = client
      @state = state
      yield
    end

    # First thing disconnect does, before polling stops.
    def detach = nil
  end
end
