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
  # Always #close a producer: it flushes and releases the native handle.
  class Producer
    include Transactions

    QUEUE_FULL = KafkaError.number_for(:queue_full)
    PURGED = KafkaError.number_for(:purge_queue)
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
      @client = Native::Producer.new(@config.kafka_pairs)
      @notifier = DeliveryNotifier.new(@config.max_wait_timeout)
      @client.handles(DeliveryHandle, @notifier)
      @partitioner = Partitioner.new(@client, @config.max_wait_timeout)
      @transaction_mutex = Mutex.new
      @lifecycle = Mutex.new
      @closing = false
      @closed = false
      start_polling
    end

    # Enqueues a message; the handle resolves when its delivery report arrives.
    # @param message [Hash] topic:, payload:, key:, partition:, partition_key:, headers:, timestamp:, label:
    # @return [DeliveryHandle]
    # @raise [Errors::MessageInvalidError, Errors::ProducerClosedError, Errors::ProduceError]
    def produce_async(message)
      ensure_open!
      handle = @client.produce(message)
      handle.is_a?(DeliveryHandle) ? handle : produce_slowly(message, handle)
    end

    # Produces and waits for the delivery report (config.max_wait_timeout).
    # @return [DeliveryReport]
    # @raise [Errors::WaitTimeoutError, Errors::ProduceError] and what #produce_async raises
    def produce_sync(message)
      produce_async(message).wait
    end

    # Validates every message first (nothing is sent if one is invalid), then enqueues them.
    # @return [Array<DeliveryHandle>]
    def produce_many_async(messages)
      ensure_open!
      raise Errors::MessageInvalidError, "messages must be an Array, got #{messages.class}" unless messages.is_a?(Array)

      messages.each { |message| @client.validate(message) }
      messages.map { |message| produce_async(message) }
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

    def closed? = @closed

    # Flushes, waits for every outstanding delivery report, stops polling and
    # releases the native handle. Idempotent; safe from any thread, including
    # a callback running on the poller thread.
    # @param timeout [Numeric, nil] ms to wait for deliveries; after it, what is
    #   still queued is purged and its handles resolve with an error.
    def close(timeout: nil)
      return if @closed || @lifecycle.owned? # a callback of our own close: the outer call finishes
      # On the polling thread, never wait for a close running elsewhere: it waits
      # for this very thread, and finishes as soon as the callback returns.
      return if @lifecycle.locked? && @poller.in_poller_thread?

      @lifecycle.synchronize do
        return if @closed

        @closing = true
        @client.forked? ? (@closed = true) : shut_down(timeout)
      end
      @monitor.instrument("producer.closed", producer_id: @id)
    end

    # Purges what is still queued or in flight (those handles resolve with a
    # purge error), then closes.
    def close!
      @closing = true
      @client.purge unless @client.closed?
      close
    end

    def inspect = "#<#{self.class.name} id=#{@id.inspect} mode=#{@config.polling.mode} #{@closed ? "closed" : "open"}>"

    private

    def start_polling
      @state = Polling::State.new(producer_id: @id, client: @client, monitor: @monitor, notifier: @notifier,
                                  logger: @config.logger, max_time: @config.polling.fd.max_time,
                                  periodic_poll_interval: @config.polling.fd.periodic_poll_interval)
      @poller = if @config.polling.mode == :thread
                  Polling::PollThread.new
                else
                  @config.polling.poller || Polling::Poller.instance
                end
      @notifier.attach(@poller, @state)
      @poller.register(@state)
    rescue StandardError
      @client.destroy
      raise
    end

    def ensure_open!
      raise Errors::ProducerClosedError, "producer #{@id} is closed" if @closing
    end

    # What #produce_async does when the native produce did not return a handle:
    # false asks us to resolve partition_key first; an Integer is librdkafka's error.
    def produce_slowly(message, result)
      partition = nil
      if result == false
        partition = @partitioner.call(message)
        result = @client.produce(message, partition)
      end
      result = retry_on_full_queue(message, partition) if result == QUEUE_FULL
      raise Errors::ProduceError, KafkaError.new(result) if result.is_a?(Integer)

      result
    end

    # librdkafka's local queue (queue.buffering.max.messages) is full: wait for
    # room, bounded by config.wait_timeout_on_queue_full.
    def retry_on_full_queue(message, partition)
      return QUEUE_FULL unless @config.wait_on_queue_full

      deadline = now + (@config.wait_timeout_on_queue_full / 1000.0)
      while now < deadline
        make_room
        result = @client.produce(message, partition)
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

    def shut_down(timeout)
      unless wait_for_deliveries(timeout)
        @client.purge
        wait_for_deliveries(@config.max_wait_timeout)
      end
      @poller.unregister(@state)
      @client.destroy
      orphans = @client.take_inflight
      orphans.each { |handle| handle.resolve(NO_PARTITION, NO_OFFSET, PURGED) }
      @notifier.notify
      @closed = true
    end

    # rd_kafka_flush only waits (the poller serves the queue meanwhile); on the
    # poller's own thread nobody else would serve it, so we do.
    def wait_for_deliveries(timeout_ms)
      unless @poller.in_poller_thread?
        started = now
        return false unless @client.flush(timeout_ms || -1)

        left = timeout_ms && [timeout_ms - ((now - started) * 1000), 0].max
        return @notifier.wait_until(left) { @state.settled? }
      end

      deadline = timeout_ms && now + (timeout_ms / 1000.0)
      until @client.outq_len.zero?
        return false if deadline && now >= deadline

        @state.pump
      end
      true
    end

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end
