# frozen_string_literal: true

module Sluice
  class ShareConsumer
    # One record a share consumer acquired: a message with how many times it
    # has been delivered (1 the first time; a release, or a lock that ran
    # out, delivers it again with one more). Accept, release or reject it
    # through the consumer (ShareConsumer#accept, ...).
    # (#partition is the field, as Message's: a record is no collection to partition)
    Record = Struct.new(:topic, :partition, :offset, :key, :payload, :timestamp_ms, :raw_headers, :delivery_count, :error_tuple) do # rubocop:disable Lint/StructNewOverride
      # @return [Hash{String => String, nil}] the headers (a name given twice: its last value)
      def headers
        @headers ||= (raw_headers || []).each_slice(2).to_h.freeze
      end

      # @return [KafkaError, nil] a record-level error librdkafka reported in its place (already acknowledged by it)
      def error = error_tuple && KafkaError.from_tuple(error_tuple)

      # @return [Array(String, Integer, Integer)] topic, partition, offset: what acknowledges it
      def position = [topic, partition, offset]

      # @return [String]
      def inspect = "#<#{self.class.name} #{topic}/#{partition}@#{offset} delivery_count=#{delivery_count}>"
    end
  end
end
