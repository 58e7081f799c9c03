# frozen_string_literal: true

module Sluice
  class Producer
    # Tombstones: nil-payload messages that delete their key from a compacted
    # topic. The key and the partition are required: compaction only removes
    # the key from the partition it was written to.
    module Tombstones
      # Produces a tombstone and waits for its report.
      # @param message [Hash] topic:, key: (String), partition: (Integer), and headers:, label:, ...
      # @return [Delivery::Report]
      # @raise [Errors::MessageInvalidError] without a String key: or an Integer partition:
      # @example
      #   producer.tombstone_sync(topic: "users", key: "user-1", partition: 3)
      def tombstone_sync(**message) = produce_sync(tombstone(**message))

      # @param message [Hash] as for #tombstone_sync
      # @return [Delivery::Handle]
      # @raise [Errors::MessageInvalidError] without a String key: or an Integer partition:
      def tombstone_async(**message) = produce_async(tombstone(**message))

      # @param tombstones [Array<Hash>] topic:, key:, partition: (and headers:, label:, ...)
      # @return [Array<Delivery::Report>]
      # @raise [Errors::MessageInvalidError] one is invalid (none was sent)
      def tombstone_many_sync(tombstones) = produce_many_sync(tombstones_of(tombstones))

      # @param tombstones [Array<Hash>] as for #tombstone_many_sync
      # @return [Array<Delivery::Handle>]
      # @raise [Errors::MessageInvalidError] one is invalid (none was sent)
      def tombstone_many_async(tombstones) = produce_many_async(tombstones_of(tombstones))

      private

      def tombstones_of(tombstones)
        batch!(tombstones).map do |message|
          raise Errors::MessageInvalidError, "a tombstone must be a Hash, got #{message.class}" unless message.is_a?(Hash)

          tombstone(**message)
        end
      end

      def tombstone(topic: nil, key: nil, partition: nil, payload: nil, **rest)
        raise Errors::MessageInvalidError, "a tombstone needs a String :key, got #{key.inspect}" unless key.is_a?(String)
        unless partition.is_a?(Integer) && partition >= 0
          raise Errors::MessageInvalidError, "a tombstone needs a :partition (Integer >= 0), got #{partition.inspect}"
        end
        raise Errors::MessageInvalidError, "a tombstone has no payload, got #{payload.class}" unless payload.nil?

        { topic: topic, key: key, partition: partition, payload: nil, **rest }
      end
    end
  end
end
