# frozen_string_literal: true

module Sluice
  # Where a message landed (or why it did not): #error is nil or a Sluice::KafkaError.
  DeliveryReport = Struct.new(:topic, :partition, :offset, :error, :label) do
    def success? = error.nil?
  end
end
