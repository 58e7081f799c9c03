# frozen_string_literal: true

module Sluice
  # Produces messages to Kafka through one librdkafka handle.
  #
  # @example
  #   producer = Sluice::Producer.new do |config|
  #     config.kafka = { "bootstrap.servers": "127.0.0.1:9092" }
  #   end
  #   producer.produce_sync(topic: "events", payload: "hello")
  #   producer.close
  #
  # Thread-safe: any number of threads and fibers may produce concurrently.
  # Always #close a producer: it flushes and releases the native handle (one
  # left open is closed at exit, see Shutdown).
  #
  # One object with collaborators, each the only holder of its state: its
  # ClientLife (status, the lifecycle lock, connect and disconnect, the close
  # paths), its Transactions (a transactional producer's transactions) and
  # its Buffering (the messages held until a flush). Lifecycle (its hooks in
  # the life, close, reload), Batches and Tombstones are its own methods,
  # split by file.
  class Producer
    include Clock

    include Lifecycle
    include Batches
    include Lines
    include Tombstones

    # librdkafka's error numbers the producer acts on: a full local queue (waited
    # out, see Config#wait_on_queue_full), a purge, a destroyed client.
    QUEUE_FULL = KafkaError.number_for(:queue_full)
    # (see QUEUE_FULL)
    PURGED = KafkaError.number_for(:purge_queue)
    # (see QUEUE_FULL)
    DESTROYED = KafkaError.number_for(:destroy)
    # What a report that never arrived (the handle was orphaned by close) says.
    NO_PARTITION = -1
    NO_OFFSET = -1001 # RD_KAFKA_OFFSET_INVALID

    # @return [Middleware] steps every message goes through before it is produced
    attr_reader :middleware

    # The client in use (WaterDrop's name): a Native::Producer, or the
    # config.client_class of a test (Clients::Buffered#messages). A reload
    # replaces it.
    # @return [Native::Producer, Clients::Buffered, Clients::Dummy]
    attr_reader :client

    # Builds the producer and connects it: the block fills in its settings,
    # which are then validated and frozen.
    # @yieldparam config [Config]
    # @raise [Errors::ConfigurationInvalidError] a setting sluice or librdkafka refuses
    # @example
    #   producer = Sluice::Producer.new do |config|
    #     config.kafka = { "bootstrap.servers": "127.0.0.1:9092", "enable.idempotence": true }
    #     config.max_wait_timeout = 10_000
    #   end
    def initialize(&)
      configure(Config.new, &)
      @notifier = DeliveryNotifier.new(@config.max_wait_timeout)
      @middleware = Middleware.new
      @topic_configs = TopicConfigs.new
      init_lifecycle
      @transactions = Transactions.new(self, life: @life, ensure_open: method(:ensure_open!), reload: method(:reload!),
                                             auth_failure: -> { @state.auth_failure })
      @buffering = Buffering.new(self, transactions: @transactions, dispatch: method(:dispatch_many))
      @life.open
    end

    # Enqueues a message; the handle resolves when its delivery report arrives.
    # @param message [Hash] topic: (required), payload: (String or nil), key:,
    #   partition: or partition_key:, headers: ({ name => value or [values] }),
    #   timestamp: (Time or ms), label: (anything, handed back in the report)
    # @return [DeliveryHandle]
    # @raise [Errors::MessageInvalidError, Errors::ProducerClosedError, Errors::ProduceError]
    #   (a fatal error: #fatal? true, with the fatal code)
    # @example
    #   handle = producer.produce_async(topic: "events", key: "user-1", payload: "signed up")
    #   report = handle.wait # => #<Sluice::DeliveryReport topic="events" partition=0 offset=41>
    def produce_async(message)
      return transaction { produce_async(message) } if needs_own_transaction?

      message = @middleware.run(message)
      # The hot path: no block frames unless someone listens (each costs about 50 ns of a 1 µs call).
      return enqueue(message, reload: true, refusal: "message.produce_async") unless @monitor.listening?("message.produced_async")

      instrument_with("message.produced_async", :message, message) { enqueue(message, reload: true, refusal: "message.produce_async") }
    end

    # Produces and waits for the delivery report (config.max_wait_timeout).
    # @param message [Hash] as for #produce_async
    # @return [DeliveryReport]
    # @raise [Errors::WaitTimeoutError, Errors::ProduceError] and what #produce_async raises
    # @example
    #   report = producer.produce_sync(topic: "events", payload: "hello", headers: { "source" => "docs" })
    #   report.offset # => 42
    def produce_sync(message)
      return transaction { produce_sync(message) } if needs_own_transaction?

      message = @middleware.run(message)
      instrument_with("message.produced_sync", :message, message) do
        reloading { enqueue(message, refusal: "message.produce_sync").wait(max_wait_timeout: Variant.current(self)&.max_wait_timeout) }
      end
    end

    # Validates every message first (nothing is sent if one is invalid), then
    # enqueues the whole batch in one native call, in order.
    # @param messages [Array<Hash>] each as for #produce_async
    # @return [Array<DeliveryHandle>]
    # @raise [Errors::MessageInvalidError] one message is invalid (none was sent)
    # @raise [Errors::ProduceManyError] when enqueuing failed part-way; its
    #   #dispatched holds the handles of the messages already enqueued
    def produce_many_async(messages)
      return transaction { produce_many_async(messages) } if needs_own_transaction?

      ensure_open!
      messages = @middleware.run_many(batch!(messages))
      instrument_with("messages.produced_async", :messages, messages) { dispatch_many(messages, refusal: "messages.produce_many_async") }
    end

    # #produce_many_async, then waits for every delivery report (sent at once,
    # without waiting linger.ms for more).
    # @param messages [Array<Hash>] each as for #produce_async
    # @return [Array<DeliveryReport>] in the order of messages
    # @raise [Errors::WaitTimeoutError, Errors::ProduceError] and what #produce_many_async raises
    def produce_many_sync(messages)
      return transaction { produce_many_sync(messages) } if needs_own_transaction?

      ensure_open!
      messages = @middleware.run_many(batch!(messages))
      instrument_with("messages.produced_sync", :messages, messages) do
        handles = dispatch_many(messages, refusal: "messages.produce_many_sync")
        send_now
        wait_all(handles)
      end
    end

    # A view of this producer whose produce_* and flush_* use these
    # topic-level librdkafka settings and wait max_wait_timeout (ms).
    # @param topic_config [Hash] topic-level librdkafka properties ("acks", "compression.type", ...)
    # @param max_wait_timeout [Numeric] ms the variant's sync calls wait
    # @return [Variant]
    # @raise [Errors::ConfigurationInvalidError] a setting librdkafka refuses at topic level
    # @raise [Errors::ProducerClosedError]
    # @example
    #   durable = producer.with(topic_config: { "acks": "all" }, max_wait_timeout: 30_000)
    #   durable.produce_sync(topic: "payments", payload: "42 EUR")
    def with(topic_config: {}, max_wait_timeout: @config.max_wait_timeout)
      ensure_open!
      unless max_wait_timeout.is_a?(Numeric) && max_wait_timeout.positive?
        raise Errors::ConfigurationInvalidError, "max_wait_timeout must be a positive number of milliseconds, got #{max_wait_timeout.inspect}"
      end

      id = @topic_configs.id_for(topic_config) { @client }
      Variant.new(self, topic_config: topic_config.dup, topic_config_id: id, max_wait_timeout: max_wait_timeout)
    end
    alias variant with

    # Runs the block in a transaction (a producer with "transactional.id"):
    # commits when it returns, aborts and re-raises when it raises, aborts
    # quietly on Sluice::AbortTransaction, aborts and raises
    # EarlyTransactionExitNotAllowedError on break, return or throw. A nested
    # call joins the outer transaction. One transaction at a time per
    # producer; it belongs to the fiber that runs the block (a produce of
    # another fiber runs in a transaction of its own).
    # Every error raised out of it (the block's own ones too) says what
    # became of the transaction: #transaction_outcome is :aborted (it did
    # not commit, and never will) or :unknown (a commit was sent and its
    # answer not learned: it may have committed). See Errors::TransactionOutcome.
    # @return the block's value (nil when aborted)
    # @raise [Errors::TransactionError] (#fatal? for a fatal error: with
    #   config.reload_on_transaction_fatal_error, the default, the producer
    #   has already rebuilt its client, and the next transaction can go ahead)
    # @raise [Errors::EarlyTransactionExitNotAllowedError] the block was left by break, return or throw
    # @yield the work of the transaction: produce_*, transaction_mark_as_consumed
    # @example
    #   producer.transaction do
    #     producer.produce_async(topic: "orders", payload: "created")
    #     producer.produce_async(topic: "audit", payload: "order created")
    #   end # both committed, or neither
    def transaction(&) = @transactions.run(&)

    # Exactly once, consume-transform-produce: the consumer's offsets after
    # messages (a Message or several; per partition, after its last one) join
    # the open transaction, so the messages the transaction produced and the
    # input offsets commit (or abort) together. The consumer
    # then commits nothing itself: give it "enable.auto.commit": false.
    # @raise [Errors::TransactionRequiredError] outside this producer's transaction block
    # @raise [Errors::TransactionError]
    # @param consumer [Consumer] the consumer the messages came from
    # @param messages [Message, Array<Message>]
    # @return [nil]
    def transaction_mark_as_consumed(consumer, messages) = @transactions.mark_as_consumed(consumer, messages)

    # @return [Boolean] the producer has a transactional.id
    def transactional? = @config.transactional?

    # @return [Boolean] inside a transaction block (of this fiber)
    def transaction? = @transactions.own?

    # Adds a message to the buffer, to be sent by the next #flush_sync or
    # #flush_async. Middleware runs and the message is validated now, not
    # again when it is flushed.
    # @param message [Hash] as for #produce_async
    # @return [Integer] messages now buffered
    # @raise [Errors::MessageInvalidError, Errors::ProducerClosedError]
    def buffer(message)
      ensure_open!
      message = @middleware.run(message)
      @client.validate(message)
      instrument_with("message.buffered", :message, message) { @buffering.push(message) }
    end

    # Buffers every message, or none when one is invalid.
    # @param messages [Array<Hash>]
    # @return [Integer] messages now buffered
    # @raise [Errors::MessageInvalidError, Errors::ProducerClosedError]
    def buffer_many(messages)
      ensure_open!
      messages = @middleware.run_many(batch!(messages))
      messages.each { |message| @client.validate(message) }
      instrument_with("messages.buffered", :messages, messages) { @buffering.concat(messages) }
    end

    # @return [Array<Hash>] the messages buffered and not yet flushed (a copy)
    def buffered = @buffering.messages

    # Sends everything buffered and waits for the delivery reports. A
    # message leaves the buffer once librdkafka took it, whatever the wait
    # does after: a WaitTimeoutError or a delivery the broker refused
    # (ProduceError) leave nothing behind to be sent twice; only what
    # librdkafka never took (ProduceManyError) goes back, in front.
    # @return [Array<DeliveryReport>]
    # @raise [Errors::ProduceManyError] and what #produce_many_sync raises
    def flush_sync = flush_buffer(:sync)

    # Sends everything buffered, without waiting for the reports.
    # @return [Array<DeliveryHandle>]
    # @raise [Errors::ProduceManyError] and what #produce_many_async raises
    def flush_async = flush_buffer(:async)

    # Drops every message still buffered, queued in librdkafka or in flight:
    # their handles resolve with a purge error (`message.purged` for each).
    # @return [nil]
    # @raise [Errors::ProducerClosedError]
    def purge
      ensure_open!
      @buffering.take
      @client.purge
      @monitor.instrument("buffer.purged", producer_id: @id)
      nil
    end

    # Partitions of topic, from metadata (cached for a while).
    # @param topic [String, Symbol]
    # @return [Integer]
    # @raise [Errors::ProduceError] the metadata request failed (unknown topic, timeout)
    # @raise [Errors::AuthenticationError] the brokers refuse the producer's credentials or TLS
    def partition_count(topic) = @partitioner.partition_count(topic.to_s)

    # Waits until every message produced so far has its delivery report.
    # @param timeout_ms [Numeric, nil] nil: no limit
    # @return [Boolean] false when timeout_ms passed first
    # @raise [Errors::ProducerClosedError]
    # @raise [Errors::AuthenticationError] messages failed meanwhile because
    #   the broker refused the client's credentials or TLS
    def flush(timeout_ms = nil)
      ensure_open!
      refusals = @state.refusals
      deadline = timeout_ms && now + (timeout_ms / 1000.0)
      late = now + RefusableRead::GRACE
      loop do
        done = wait_for_deliveries(flush_slice(deadline, late))
        raise_refused(refusals, late, done)
        return done if done || (deadline && now >= deadline)
      end
    end

    # @return [Integer] messages not yet confirmed by a delivery report
    def outstanding = @client.inflight_count

    # @return [Boolean] enable.idempotence is on (a transactional producer always is)
    def idempotent? = @config.idempotent?

    # @return [String] id, polling mode and whether it is closed
    def inspect = "#<#{self.class.name} id=#{@id.inspect} mode=#{@config.polling.mode} #{closed? ? "closed" : "open"}>"

    private

    # rd_kafka_flush cannot be woken: flush waits in slices (RefusableRead::GRACE,
    # then RefusableRead::SLICE), so a refusal reported before it began
    # (said again only at librdkafka's next failed reconnect, up to 10 s
    # later) ends it too.
    def flush_slice(deadline, late)
      slice = now < late ? ms_until(late) : RefusableRead::SLICE
      deadline ? [slice, ms_until(deadline)].min : slice
    end

    # Messages failed with a refusal during the flush, or it is late while one is current.
    def raise_refused(refusals, late, done)
      failure = @state.auth_failure if @state.refusals != refusals
      failure ||= @state.refusing_failure if !done && now >= late
      raise Errors::AuthenticationError, failure if failure
    end

    # librdkafka refuses a transactional producer's messages outside a
    # transaction ("Erroneous state"), and another fiber's open transaction
    # must not take them in: like WaterDrop, such a produce runs in a
    # transaction of its own (committed before it returns).
    def needs_own_transaction? = @config.transactional? && !@transactions.own?

    def flush_buffer(mode)
      ensure_open!
      return transaction { flush_buffer(mode) } if needs_own_transaction?

      messages = @buffering.take
      return [] if messages.empty?

      instrument_with(mode == :sync ? "buffer.flushed_sync" : "buffer.flushed_async", :messages, messages) do
        handles = @buffering.dispatch(messages, refusal: mode == :sync ? "buffer.flush_sync" : "buffer.flush_async")
        mode == :sync ? wait_all(handles) : handles
      end
    end

    def ensure_open!
      return unless @life.closing_or_closed?
      return if @transactions.own_open? # the transaction close is waiting for may finish
      return if @buffering.final_flush? # close sending what was buffered

      raise Errors::ProducerClosedError, "producer #{@id} is closed"
    end

    # The hot path of every produce. reload: true does what #reloading does,
    # without a block: an idempotent producer's fatal error may be answered
    # with a reload and another try. A message refused before it was
    # dispatched (invalid, or refused by librdkafka at once) is reported as
    # error.occurred of type refusal, as a failed delivery is (WaterDrop's
    # listeners count both).
    def enqueue(message, refusal:, reload: false)
      attempt = 0
      begin
        ensure_open! unless @life.connected?
        client = @client
        config_id = Variant.current(self)&.topic_config_id
        handle = client.produce(message, nil, config_id)
        handle = produce_slowly(client, message, handle, config_id) unless handle.is_a?(DeliveryHandle)
        @transactions.current&.note(handle)
        handle
      rescue Errors::ProducerClosedError => e
        raise unless client_replaced?(client, e)

        retry
      rescue Errors::ProduceError => e
        retry if reload && reload_after_idempotent_fatal?(e, attempt += 1)

        refused(refusal, e, message)
      rescue Errors::MessageInvalidError => e
        refused(refusal, e, message)
      end
    end

    # Reports a message (or batch) refused before dispatch, and raises the error on.
    def refused(type, error, payload)
      @monitor.instrument("error.occurred", producer_id: @id, type: type, error: error, (payload.is_a?(Array) ? :messages : :message) => payload)
      raise error
    end

    # An idempotent producer's fatal error may be answered with a reload and
    # another try (see Config#reload_on_idempotent_fatal_error).
    def reloading
      attempt = 0
      begin
        yield
      rescue Errors::ProduceError => e
        raise unless reload_after_idempotent_fatal?(e, attempt += 1)

        retry
      end
    end

    def instrument_with(name, key, value, &block)
      return yield unless @monitor.listening?(name)

      @monitor.instrument(name, { producer_id: @id, key => value }, &block)
    end

    def batch!(messages)
      raise Errors::MessageInvalidError, "messages must be an Array, got #{messages.class}" unless messages.is_a?(Array)

      messages
    end

    # A synchronous batch waits for its reports anyway: waiting linger.ms (5
    # by default) for more messages first only delays them (about 160k msg/s
    # with 1,000-message batches against 500k without). librdkafka's flush
    # sends at once, ignoring linger.ms, while it runs: 1 ms of it (GVL
    # released) is enough for the broker threads to take the batch.
    def send_now
      @client.flush(1)
    rescue Errors::ProducerClosedError
      nil # closed meanwhile: the handles resolve through close
    end

    def wait_all(handles)
      timeout = Variant.current(self)&.max_wait_timeout
      handles.map { |handle| handle.wait(max_wait_timeout: timeout) }
    end

    # What #produce_async does when the native produce did not return a handle:
    # false asks us to resolve partition_key first; an Integer is librdkafka's error.
    def produce_slowly(client, message, result, config_id)
      partition = nil
      if result == false
        partition = @partitioner.call(message)
        result = client.produce(message, partition, config_id)
      end
      result = retry_on_full_queue(client, message, partition, config_id) if result == QUEUE_FULL
      return result unless result.is_a?(Integer)

      raise Errors::ProduceError, error_for(client, result)
    end

    # A producer in a fatal state refuses every message (with _FATAL, or the
    # fatal code itself): say which fatal error it is, and that it is fatal.
    def error_for(client, code)
      fatal = client.fatal_error
      fatal ? KafkaError.new(*fatal, fatal: true) : KafkaError.new(code)
    end

    # librdkafka's local queue (queue.buffering.max.messages) is full: wait for
    # room, bounded by config.wait_timeout_on_queue_full.
    def retry_on_full_queue(client, message, partition, config_id)
      return QUEUE_FULL unless @config.wait_on_queue_full

      deadline = now + (@config.wait_timeout_on_queue_full / 1000.0)
      while now < deadline
        make_room
        result = client.produce(message, partition, config_id)
        return result unless result == QUEUE_FULL
      end
      QUEUE_FULL
    end

    def make_room
      backoff = @config.wait_backoff_on_queue_full
      if @poller.in_poller_thread?
        @state.pump(backoff) # nobody else polls while we are the poller
      else
        sleep(backoff / 1000.0)
      end
    end
  end
end
