# frozen_string_literal: true

module Sluice
  class Producer
    # How produce_many_* and flushes hand a batch to librdkafka: the whole
    # batch in one native call (Native::Producer#produce_many), validated
    # first. A full local queue mid-batch is waited out like a single
    # message's (config.wait_on_queue_full), then the batch goes on from the
    # first message librdkafka refused.
    module Batches
      private

      # @return [Array<DeliveryHandle>]
      # @raise [Errors::ProduceManyError] enqueuing stopped part-way (#dispatched: the handles so far)
      # @param refusal [String] the error.occurred type of a batch refused before dispatch
      def dispatch_many(messages, refusal:)
        ensure_open!
        client = @client
        config_id = Variant.current(self)&.topic_config_id
        handles, code = produce_batch(client, messages, nil, config_id)
        return note_batch(handles) unless code

        continue_batch(client, messages, handles, code, config_id)
      rescue Errors::ProducerClosedError => e
        raise unless client_replaced?(client, e) # nothing was enqueued: produce_many refuses before it starts

        retry
      rescue Errors::MessageInvalidError, Errors::ProduceError => e
        refused(refusal, e, messages)
      end

      # partition_key: librdkafka's partitioner needs the partition count,
      # which Ruby looks up (cached metadata) before the native call.
      def produce_batch(client, messages, partitions, config_id)
        result = client.produce_many(messages, partitions, config_id)
        return result unless result == false

        messages.each { |message| client.validate(message) } # all of them before the first lookup (a metadata round trip)
        client.produce_many(messages, messages.map { |message| @partitioner.call(message) }, config_id)
      end

      def continue_batch(client, messages, dispatched, code, config_id)
        deadline = now + (@config.wait_timeout_on_queue_full / 1000.0)
        while code == QUEUE_FULL && @config.wait_on_queue_full && now < deadline
          make_room
          handles, code = produce_batch(client, messages.drop(dispatched.size), nil, config_id)
          dispatched.concat(handles)
          return note_batch(dispatched) unless code
        end
        note_batch(dispatched)
        raise Errors::ProduceManyError.new(error_for(client, code), dispatched: dispatched)
      rescue Errors::ProducerClosedError # closed (or reloaded) while we waited for room
        raise Errors::ProduceManyError.new(KafkaError.new(DESTROYED), dispatched: note_batch(dispatched))
      end

      def note_batch(handles)
        @transactions.current&.note(handles.first)
        handles
      end
    end
  end
end
