# frozen_string_literal: true

module Sluice
  # Where a message landed (or why it did not): #error is nil or a Sluice::KafkaError.
  class DeliveryReport
    attr_reader :topic, :partition, :offset, :error, :label

    def initialize(topic, partition, offset, error, label = nil)
      @topic = topic
      @partition = partition
      @offset = offset
      @error = error
      @label = label
    end

    def success? = @error.nil?

    def to_h = { topic: @topic, partition: @partition, offset: @offset, error: @error, label: @label }

    def ==(other) = other.is_a?(DeliveryReport) && to_h == other.to_h

    def inspect
      "#<#{DeliveryReport.name} topic=#{@topic.inspect} partition=#{@partition} offset=#{@offset}" \
        "#{" error=#{@error.code}" if @error}#{" label=#{@label.inspect}" if @label}>"
    end
  end
end
