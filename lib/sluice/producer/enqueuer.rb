# frozen_string_literal: true

module Sluice
  class Producer
    # What a produce does when librdkafka did not take a message, or a whole
    # batch, at once: partition_key looked up first (librdkafka's partitioner
    # needs the partition count, which Ruby looks up from cached metadata), a
    # full local queue (queue.buffering.max.messages) waited out within
    # config.wait_timeout_on_queue_full, then the batch goes on from the first
    # message librdkafka refused. One per native client (built when it connects),
    # with that client's partitioner; the client itself is passed at each call.
    # @api private
    class Enqueuer
      include Clock

      # Up to this many records a #lines call when no max is given.
      UNLIMITED_LINES = 2**62

      # @param partitioner [Partitioner] the client's
      # @param state [Polling::PolledClient] the client's poll state (pumped while waiting on the poller's thread)
      # @param config [Config] the producer's settings when the client connected
      # @param poller [Polling::Poller, Polling::PollThread] the producer's
      def initialize(partitioner:, state:, config:, poller:)
        @partitioner = partitioner
        @state = state
        @config = config
        @poller = poller
      end

      # The native produce did not return a handle: false asks us to resolve
      # partition_key first; an Integer is librdkafka's error.
      # @return [DeliveryHandle]
      # @raise [Errors::ProduceError]
      def one(client, message, result, config_id)
        partition = nil
        if result == false
          partition = @partitioner.call(message)
          result = client.produce(message, partition, config_id)
        end
        result = retry_on_full_queue(client, message, partition, config_id) if result == QUEUE_FULL
        return result unless result.is_a?(Integer)

        raise Errors::ProduceError, error_for(client, result)
      end

      # The whole batch in one native call (Native::Producer#produce_many).
      # @return [Array<DeliveryHandle>]
      # @raise [Errors::ProduceManyError] enqueuing stopped part-way (#dispatched: the handles so far)
      def many(client, messages, config_id)
        handles, code = batch(client, messages, config_id)
        return handles unless code

        continue_batch(client, messages, handles, code, config_id)
      end

      # Records of data sent as they are (Producer#produce_lines), a full local
      # queue waited out as a single message's is.
      # @return [Array(Integer, Integer, Integer, KafkaError, nil)] see Producer#produce_lines
      def lines(client, topic, data, delimiter, from:, config_id:)
        offset, line, partition, max, empties = from.values_at(:offset, :line, :partition, :max, :empties)
        sent = 0
        deadline = now + (@config.wait_timeout_on_queue_full / 1000.0)
        loop do
          offset, line, count, code = client.produce_lines(topic, data, offset, delimiter, partition, line,
                                                           max ? max - sent : UNLIMITED_LINES, empties, config_id)
          sent += count
          return [offset, line, sent, code && error_for(client, code)] unless full_queue_wait?(code, deadline)

          make_room
        end
      end

      private

      def full_queue_wait?(code, deadline) = code == QUEUE_FULL && @config.wait_on_queue_full && now < deadline

      def batch(client, messages, config_id)
        result = client.produce_many(messages, nil, config_id)
        return result unless result == false

        messages.each { |message| client.validate(message) } # all of them before the first lookup (a metadata round trip)
        client.produce_many(messages, messages.map { |message| @partitioner.call(message) }, config_id)
      end

      def continue_batch(client, messages, dispatched, code, config_id)
        deadline = now + (@config.wait_timeout_on_queue_full / 1000.0)
        while code == QUEUE_FULL && @config.wait_on_queue_full && now < deadline
          make_room
          handles, code = batch(client, messages.drop(dispatched.size), config_id)
          dispatched.concat(handles)
          return dispatched unless code
        end
        raise Errors::ProduceManyError.new(error_for(client, code), dispatched: dispatched)
      rescue Errors::ProducerClosedError # closed (or reloaded) while we waited for room
        raise Errors::ProduceManyError.new(KafkaError.new(DESTROYED), dispatched: dispatched)
      end

      # A producer in a fatal state refuses every message (with _FATAL, or the
      # fatal code itself): say which fatal error it is, and that it is fatal.
      def error_for(client, code)
        fatal = client.fatal_error
        fatal ? KafkaError.new(*fatal, fatal: true) : KafkaError.new(code)
      end

      # Wait for room, bounded by config.wait_timeout_on_queue_full.
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
end
