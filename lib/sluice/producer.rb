# frozen_string_literal: true

module Sluice
  # Produces messages to Kafka through one librdkafka handle.
  #
  #   producer = Sluice::Producer.new do |config|
  #     config.kafka = { "bootstrap.servers": "127.0.0.1:9092" }
  #   end
  #   producer.produce_sync(topic: "events", payload: "hello")
  #   producer.close
  #
  # Thread-safe: any number of threads and fibers may produce concurrently.
  # Always #close a producer: it flushes and releases the native handle (one
  # left open is closed at exit, see Shutdown).
  class Producer
    include Transactions
    include Lifecycle

    QUEUE_FULL = KafkaError.number_for(:queue_full)
    PURGED = KafkaError.number_for(:purge_queue)
    DESTROYED = KafkaError.number_for(:destroy)
    # What a report that never arrived (the handle was orphaned by close) says.
    NO_PARTITION = -1
    NO_OFFSET = -1001 # RD_KAFKA_OFFSET_INVALID

    attr_reader :id, :config, :monitor

    # @yieldparam config [Config]
    # @raise [Errors::ConfigurationInvalidError]
    def initialize
      @config = Config.new
      yield @config if block_given?
      @config.validate!.freeze
      @id = @config.id
      @monitor = @config.monitor || Monitor.new(logger: @config.logger)
      @notifier = DeliveryNotifier.new(@config.max_wait_timeout)
      @poller = @config.polling.mode == :thread ? Polling::PollThread.new : (@config.polling.poller || Polling::Poller.instance)
      init_lifecycle
      init_transactions
      connect
      Shutdown.track(self)
    end

    # Enqueues a message; the handle resolves when its delivery report arrives.
    # @param message [Hash] topic:, payload:, key:, partition:, partition_key:, headers:, timestamp:, label:
    # @return [DeliveryHandle]
    # @raise [Errors::MessageInvalidError, Errors::ProducerClosedError, Errors::ProduceError]
    #   (a fatal error: #fatal? true, with the fatal code)
    def produce_async(message)
      enqueue(message)
    rescue Errors::ProduceError => e
      raise unless reload_after_idempotent_fatal?(e, attempt = (attempt || 0) + 1)

      retry
    end

    # Produces and waits for the delivery report (config.max_wait_timeout).
    # @return [DeliveryReport]
    # @raise [Errors::WaitTimeoutError, Errors::ProduceError] and what #produce_async raises
    def produce_sync(message)
      enqueue(message).wait
    rescue Errors::ProduceError => e
      raise unless reload_after_idempotent_fatal?(e, attempt = (attempt || 0) + 1)

      retry
    end

    # Validates every message first (nothing is sent if one is invalid), then
    # enqueues them in order.
    # @return [Array<DeliveryHandle>]
    # @raise [Errors::ProduceManyError] when enqueuing failed part-way; its
    #   #dispatched holds the handles of the messages already enqueued
    def produce_many_async(messages)
      ensure_open!
      raise Errors::MessageInvalidError, "messages must be an Array, got #{messages.class}" unless messages.is_a?(Array)

      messages.each { |message| @client.validate(message) }
      dispatched = []
      messages.each { |message| dispatched << produce_async(message) }
      dispatched
    rescue Errors::ProduceError, Errors::ProducerClosedError => e
      raise unless dispatched

      raise Errors::ProduceManyError.new(e.is_a?(Errors::ProduceError) ? e.kafka_error : KafkaError.new(DESTROYED), dispatched: dispatched)
    end

    # @return [Array<DeliveryReport>]
    def produce_many_sync(messages)
      produce_many_async(messages).map(&:wait)
    end

    # Waits until every message produced so far has its delivery report.
    # @return [Boolean] false when timeout_ms passed first
    def flush(timeout_ms = nil)
      ensure_open!
      wait_for_deliveries(timeout_ms)
    end

    # Answers an `oauthbearer.token_refresh` event.
    def oauthbearer_set_token(token:, lifetime_ms:, principal_name:, extensions: {})
      error = @client.oauthbearer_set_token(token, lifetime_ms, principal_name, extensions.flat_map { |k, v| [k.to_s, v.to_s] })
      raise KafkaError.new(*error) if error
    end

    # Messages not yet confirmed by a delivery report.
    def outstanding = @client.inflight_count

    def idempotent? = transactional? || @config.kafka_setting("enable.idempotence") == "true"

    def inspect = "#<#{self.class.name} id=#{@id.inspect} mode=#{@config.polling.mode} #{@closed ? "closed" : "open"}>"

    private

    def ensure_open!
      return unless @closing
      return if own_open_transaction? # the transaction close is waiting for may finish

      raise Errors::ProducerClosedError, "producer #{@id} is closed"
    end

    # The hot path of every produce.
    def enqueue(message)
      ensure_open!
      client = @client
      handle = client.produce(message)
      handle = produce_slowly(client, message, handle) unless handle.is_a?(DeliveryHandle)
      (txn = @transaction) && (txn.first_handle ||= handle)
      handle
    rescue Errors::ProducerClosedError => e
      raise unless client_replaced?(client, e)

      retry
    end

    # What #produce_async does when the native produce did not return a handle:
    # false asks us to resolve partition_key first; an Integer is librdkafka's error.
    def produce_slowly(client, message, result)
      partition = nil
      if result == false
        partition = @partitioner.call(message)
        result = client.produce(message, partition)
      end
      result = retry_on_full_queue(client, message, partition) if result == QUEUE_FULL
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
    def retry_on_full_queue(client, message, partition)
      return QUEUE_FULL unless @config.wait_on_queue_full

      deadline = now + (@config.wait_timeout_on_queue_full / 1000.0)
      while now < deadline
        make_room
        result = client.produce(message, partition)
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

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end
