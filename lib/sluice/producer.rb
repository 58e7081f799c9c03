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
  # ClientLife (status, the lifecycle lock, settings, the native client and
  # its poll state, connect and disconnect, the close's deadline), its
  # Closing (close: what it dropped), its Reloading (a new client after a
  # fatal error), its Deliveries (waits for delivery reports), its
  # Transactions (a transactional producer's transactions), its Buffering
  # (the messages held until a flush) and, per native client, its Enqueuer
  # (the slow paths of a produce). Tombstones holds no state: produce calls
  # that build tombstones.
  class Producer
    include Clock
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

    # (see ClientHooks#id)
    attr_reader :id

    # (see ClientHooks#monitor)
    attr_reader :monitor

    # Builds the producer and connects it: the block fills in its settings,
    # which are then validated and frozen.
    # @yieldparam config [Config]
    # @raise [Errors::ConfigurationInvalidError] a setting sluice or librdkafka refuses
    # @example
    #   producer = Sluice::Producer.new do |config|
    #     config.kafka = { "bootstrap.servers": "127.0.0.1:9092", "enable.idempotence": true }
    #     config.max_wait_timeout = 10_000
    #   end
    def initialize
      config = Config.new
      yield config if block_given?
      @life = ClientLife.for(self, config.validate!.freeze, kind: :producer)
      @id = @life.id
      @monitor = @life.monitor
      @poller = @life.poller
      @notifier = DeliveryNotifier.new(config.max_wait_timeout)
      @middleware = Middleware.new
      @topic_configs = TopicConfigs.new
      build_collaborators
      @life.open
    end

    # The settings (frozen); a reload may replace them (a producer.reload listener's).
    # @return [Config]
    def config = @life.config

    # The client in use (WaterDrop's name): a Native::Producer, or the
    # config.client_class of a test (Clients::Buffered#messages). A reload
    # replaces it.
    # @return [Native::Producer, Clients::Buffered, Clients::Dummy]
    def client = @life.client

    # (see ClientHooks#status)
    def status = @life.status

    # (see ClientHooks#closed?)
    def closed? = @life.closed?

    # Sends what is buffered, waits for the outstanding delivery reports, stops polling and
    # releases the native handle. Idempotent; safe from any thread, fiber, a
    # callback on the polling thread, a signal handler (Signal.trap) and
    # at_exit. An open transaction of another thread or fiber is waited for
    # (within the timeout), then aborted.
    # @param timeout [Integer, nil] ms to wait for deliveries (and an open
    #   transaction); what is still queued after it is purged: those handles
    #   resolve with a purge error and `message.purged` reports each. nil
    #   waits for every report.
    # @raise [Errors::ProducerTransactionalCloseAttemptError] inside this
    #   producer's own transaction block
    # @return [nil]
    def close(timeout: config.max_wait_timeout) = @closing.close(timeout)

    # Closes without waiting for deliveries: what is still queued or in flight
    # is purged (those handles resolve with a purge error).
    # @return [nil]
    def close! = close(timeout: 0)

    # Shutdown's at_exit hook. Closes with the usual bound and says so loudly
    # when messages had to be dropped.
    # @api private
    # @return [void]
    def close_at_exit = @closing.close_at_exit

    # (see ClientHooks#oauthbearer_set_token)
    def oauthbearer_set_token(token:, lifetime_ms:, principal_name:, extensions: {})
      @life.answer_token(token, lifetime_ms, principal_name, extensions)
    end

    # (see ClientHooks#oauthbearer_set_token_failure)
    def oauthbearer_set_token_failure(reason) = @life.answer_token_failure(reason)

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
    def with(topic_config: {}, max_wait_timeout: config.max_wait_timeout)
      ensure_open!
      unless max_wait_timeout.is_a?(Numeric) && max_wait_timeout.positive?
        raise Errors::ConfigurationInvalidError, "max_wait_timeout must be a positive number of milliseconds, got #{max_wait_timeout.inspect}"
      end

      id = @topic_configs.id_for(topic_config) { @life.client }
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
    def transactional? = config.transactional?

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
      @life.client.validate(message)
      instrument_with("message.buffered", :message, message) { @buffering.push(message) }
    end

    # Buffers every message, or none when one is invalid.
    # @param messages [Array<Hash>]
    # @return [Integer] messages now buffered
    # @raise [Errors::MessageInvalidError, Errors::ProducerClosedError]
    def buffer_many(messages)
      ensure_open!
      messages = @middleware.run_many(batch!(messages))
      client = @life.client
      messages.each { |message| client.validate(message) }
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
      @life.client.purge
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
      @deliveries.flush(timeout_ms)
    end

    # Delimited text sent as it is, a message per record: the records of a
    # String go to librdkafka in one native call, with no Ruby object a
    # message (no Hash, no String, no DeliveryHandle), and their reports are
    # counted natively instead of resolved on handles (#line_reports). What
    # `sluice produce` uses when a line is the whole message (issue 58): a
    # million lines cost librdkafka's time, not a million objects'. Messages
    # sent this way are not instrumented one by one and take no middleware;
    # #flush and #close wait for them as for any other. An empty record is no
    # message: its number goes to empties. A full local queue is waited out
    # as #produce_async's is (config.wait_on_queue_full).
    # @api private
    # @param topic [String]
    # @param data [String] records, each ended by delimiter (the last may lack it)
    # @param delimiter [String] not empty
    # @param offset [Integer] where in data to start
    # @param line [Integer] the number of the record at offset
    # @param partition [Integer] -1: the partitioner's choice
    # @param max [Integer, nil] at most this many messages
    # @param empties [Array<Integer>] gets the numbers of the empty records
    # @return [Array(Integer, Integer, Integer, KafkaError, nil)] the offset and number of the record
    #   where it stopped, the messages sent, and why librdkafka refused that record (nil: none was)
    # @raise [Errors::ProducerClosedError]
    def produce_lines(topic, data, delimiter:, offset: 0, line: 1, partition: -1, max: nil, empties: [])
      ensure_open!
      from = { offset: offset, line: line, partition: partition, max: max, empties: empties }
      @enqueuer.lines(@life.client, topic.to_s, data, delimiter, from: from, config_id: Variant.current(self)&.topic_config_id)
    end

    # What became of the messages #produce_lines sent.
    # @api private
    # @return [Array(Integer, Array<Array(Integer, KafkaError)>)] how many were delivered so
    #   far, and each that was not since the last call: its line number and why
    def line_reports
      delivered, missed = @life.client.line_reports
      [delivered, missed.each_slice(2).map { |line, code| [line, KafkaError.new(code)] }]
    end

    # @return [Integer] messages not yet confirmed by a delivery report
    def outstanding = @life.client.inflight_count

    # @return [Boolean] enable.idempotence is on (a transactional producer always is)
    def idempotent? = config.idempotent?

    # @return [String] id, polling mode and whether it is closed
    def inspect = "#<#{self.class.name} id=#{@id.inspect} mode=#{config.polling.mode} #{closed? ? "closed" : "open"}>"

    private

    # Each holds its own state, and none calls back into the producer
    # (Transactions and Buffering are handed the producer's open check,
    # reload and batch dispatch as callables).
    def build_collaborators
      @deliveries = Deliveries.new(life: @life, notifier: @notifier, poller: @poller)
      @reloading = Reloading.new(self, life: @life, deliveries: @deliveries)
      @transactions = Transactions.new(life: @life, ensure_open: method(:ensure_open!), reload: @reloading.method(:reload!))
      @buffering = Buffering.new(id: @id, monitor: @monitor, transactions: @transactions, dispatch: method(:dispatch_many))
      @closing = Closing.new(life: @life, transactions: @transactions, buffering: @buffering, deliveries: @deliveries)
    end

    # Hooks ClientLife calls (see there).

    def native_class = config.client_class

    def closed_error = Errors::ProducerClosedError

    def polled_options = { notifier: @notifier }

    def attach(client, state)
      client.handles(DeliveryHandle, @notifier)
      @notifier.attach(@poller, state)
    end

    # The new client's partitioner and slow paths are ready before it is
    # published (yield), under the topic settings' lock: a variant made
    # meanwhile registers its settings on the new client too.
    def connected(client, state, &publish)
      @partitioner = Partitioner.new(client, config.max_wait_timeout, state.method(:refusing_failure))
      @enqueuer = Enqueuer.new(partitioner: @partitioner, state: state, config: config, poller: @poller)
      @topic_configs.register(client, &publish)
    end

    def detach = nil

    # librdkafka refuses a transactional producer's messages outside a
    # transaction ("Erroneous state"), and another fiber's open transaction
    # must not take them in: like WaterDrop, such a produce runs in a
    # transaction of its own (committed before it returns).
    def needs_own_transaction? = config.transactional? && !@transactions.own?

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
        client = @life.client
        config_id = Variant.current(self)&.topic_config_id
        handle = client.produce(message, nil, config_id)
        handle = @enqueuer.one(client, message, handle, config_id) unless handle.is_a?(DeliveryHandle)
        @transactions.current&.note(handle)
        handle
      rescue Errors::ProducerClosedError => e
        raise unless @reloading.client_replaced?(client, e)

        retry
      rescue Errors::ProduceError => e
        retry if reload && @reloading.after_idempotent_fatal?(e, attempt += 1)

        refused(refusal, e, message)
      rescue Errors::MessageInvalidError => e
        refused(refusal, e, message)
      end
    end

    # A batch in one native call (Enqueuer#many), validated first; a
    # reloaded client is tried again (nothing was enqueued on the old one:
    # produce_many refuses before it starts).
    # @return [Array<DeliveryHandle>]
    # @raise [Errors::ProduceManyError] enqueuing stopped part-way (#dispatched: the handles so far)
    # @param refusal [String] the error.occurred type of a batch refused before dispatch
    def dispatch_many(messages, refusal:)
      ensure_open!
      client = @life.client
      note_batch(@enqueuer.many(client, messages, Variant.current(self)&.topic_config_id))
    rescue Errors::ProducerClosedError => e
      raise unless @reloading.client_replaced?(client, e)

      retry
    rescue Errors::ProduceManyError => e
      note_batch(e.dispatched)
      refused(refusal, e, messages)
    rescue Errors::MessageInvalidError, Errors::ProduceError => e
      refused(refusal, e, messages)
    end

    def note_batch(handles)
      @transactions.current&.note(handles.first)
      handles
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
        raise unless @reloading.after_idempotent_fatal?(e, attempt += 1)

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
      @life.client.flush(1)
    rescue Errors::ProducerClosedError
      nil # closed meanwhile: the handles resolve through close
    end

    def wait_all(handles)
      timeout = Variant.current(self)&.max_wait_timeout
      handles.map { |handle| handle.wait(max_wait_timeout: timeout) }
    end
  end
end
