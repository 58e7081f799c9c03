# frozen_string_literal: true

module Sluice
  # The pending result of produce_async. Resolved by the poller; small on
  # purpose (one of these exists per message in flight).
  class DeliveryHandle
    attr_reader :topic, :label, :report

    def initialize(notifier, topic, label)
      @notifier = notifier
      @topic = topic
      @label = label
      @report = nil
    end

    def pending? = @report.nil?

    # Waits for the delivery report.
    # @param max_wait_timeout [Numeric] ms; default: the producer's max_wait_timeout
    # @param raise_response_error [Boolean] raise ProduceError for a failed delivery
    # @return [DeliveryReport]
    # @raise [Errors::WaitTimeoutError] the handle stays pending and can be waited on again
    # @raise [Errors::ProduceError]
    def wait(max_wait_timeout: @notifier.max_wait_timeout, raise_response_error: true)
      report = @report || @notifier.wait_for(self, max_wait_timeout)
      raise Errors::ProduceError.new(report.error, delivery_report: report) if raise_response_error && report.error

      report
    end

    # @api private — the poller's side: record the outcome once.
    def resolve(partition, offset, error_number)
      error = KafkaError.new(error_number) unless error_number.zero?
      @report = DeliveryReport.new(@topic, partition, offset, error, @label)
    end

    def inspect
      "#<#{self.class.name} topic=#{@topic.inspect} #{pending? ? 'pending' : @report.inspect}>"
    end
  end
end
