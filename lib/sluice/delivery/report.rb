# frozen_string_literal: true

module Sluice
  module Delivery
    # Where a message landed (or why it did not): #error is nil or a Sluice::KafkaError.
    class Report
      # The message's topic (String), the partition and offset it landed at
      # (Integers; -1 and -1001 when it never landed), #error (a KafkaError, or
      # nil on success) and the `label:` it was produced with (any object, for
      # the caller's bookkeeping).
      attr_reader :topic, :partition, :offset, :error, :label

      # @param topic [String]
      # @param partition [Integer]
      # @param offset [Integer]
      # @param error [KafkaError, nil]
      # @param label [Object, nil] the message's `label:`
      def initialize(topic, partition, offset, error, label = nil)
        @topic = topic
        @partition = partition
        @offset = offset
        @error = error
        @label = label
      end

      # @return [Boolean] true when the broker acknowledged the message
      def success? = error.nil?

      # @return [Hash] topic:, partition:, offset:, error:, label:
      def to_h = { topic: topic, partition: partition, offset: offset, error: error, label: label }

      # Equal field by field: a resolved DeliveryHandle equals the report it holds.
      # @param other [Object]
      # @return [Boolean]
      def ==(other) = other.is_a?(Delivery::Report) && to_h == other.to_h

      # @return [String] the fields on one line, the error as its code
      def inspect
        "#<#{Delivery::Report.name} topic=#{topic.inspect} partition=#{partition} offset=#{offset}" \
          "#{" error=#{error.code}" if error}#{" label=#{label.inspect}" if label}>"
      end
    end
  end
end
