# frozen_string_literal: true

module Sluice
  class Producer
    # Resolves `partition_key:` to a partition with librdkafka's configured
    # partitioner, so a key other than the message key can pick the partition.
    # Partition counts come from metadata, cached for a while per topic.
    class Partitioner
      include Shared::Clock

      COUNT_TTL = 30 # seconds

      # @param refused [#call] the client's current refusal of its credentials or TLS, or nil
      def initialize(client, timeout_ms, refused)
        @client = client
        @timeout_ms = timeout_ms
        @refused = refused
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
      # @raise [Errors::AuthenticationError] the brokers refuse the client's credentials or TLS
      def partition_count(topic)
        count, expires_at = @counts[topic]
        return count if count && expires_at > now

        deadline = now + (@timeout_ms / 1000.0) # metadata round trips
        error, count = Shared::RefusableRead.call(deadline, @refused) { |ms| Shared::Blocking.call { @client.partition_count(topic, ms) } }
        raise Errors::ProduceError, KafkaError.new(error) unless error.zero?

        @counts[topic] = [count, now + COUNT_TTL]
        count
      end
    end
  end
end
