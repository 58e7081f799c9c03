# frozen_string_literal: true

module Sluice
  class Producer
    # Resolves `partition_key:` to a partition with librdkafka's configured
    # partitioner, so a key other than the message key can pick the partition.
    # Partition counts come from metadata, cached for a while per topic.
    class Partitioner
      include Clock

      COUNT_TTL = 30 # seconds

      def initialize(client, timeout_ms)
        @client = client
        @timeout_ms = timeout_ms
        @counts = {}
      end

      # @return [Integer, nil] the partition for message[:partition_key]
      def call(message)
        @client.validate(message) # clear errors before the key reaches native code
        key = message[:partition_key]
        @client.partition_for(key, partition_count(message[:topic].to_s)) if key
      end

      # @return [Integer] partitions of topic, from metadata cached for COUNT_TTL
      # @raise [Errors::ProduceError] the metadata request failed
      def partition_count(topic)
        count, expires_at = @counts[topic]
        return count if count && expires_at > now

        error, count = Blocking.call { @client.partition_count(topic, @timeout_ms) } # a metadata round trip
        raise Errors::ProduceError, KafkaError.new(error) unless error.zero?

        @counts[topic] = [count, now + COUNT_TTL]
        count
      end
    end
  end
end
