# frozen_string_literal: true

module Sluice
  # The pending result of produce_async. Once resolved, the handle is its own
  # DeliveryReport: one object per message in flight, no second allocation
  # when the report arrives (this is the hot path of every produce).
  #
  # The native client builds handles (@topic, @label, @notifier) and records
  # successful deliveries (@partition, then @offset) itself, in one file:
  # ext/sluice/delivery_handle.c. See it before renaming a field.
  class DeliveryHandle < DeliveryReport
    # Built natively for each message produced.
    # @api private
    # @param notifier [DeliveryNotifier] wakes waiters when the report arrives
    # @param topic [String]
    # @param label [Object, nil] the message's `label:`
    def initialize(notifier, topic, label) # rubocop:disable Lint/MissingSuper -- a report whose fields arrive later
      @topic = topic
      @label = label
      @notifier = notifier
    end

    # Pending until the delivery report arrives (the native drain sets `@offset` last).
    # @return [Boolean]
    def pending? = @offset.nil?

    # @return [DeliveryReport, nil] this handle once resolved, nil while pending
    def report = @offset.nil? ? nil : self

    # Waits for the delivery report.
    # @param max_wait_timeout [Numeric] ms; default: the producer's max_wait_timeout
    # @param raise_response_error [Boolean] raise ProduceError for a failed delivery
    # @return [DeliveryReport]
    # @raise [Errors::WaitTimeoutError] the handle stays pending and can be waited on again
    # @raise [Errors::ProduceError]
    def wait(max_wait_timeout: nil, raise_response_error: true)
      @notifier.wait_for(self, max_wait_timeout || @notifier.max_wait_timeout) if @offset.nil?
      raise failure_class.new(@error, delivery_report: self) if raise_response_error && @error

      self
    end

    # Records a failed delivery (or a purge at close). A successful one is
    # recorded natively, `@partition` and then `@offset`
    # (ext/sluice/delivery_handle.c, sluice_handle_delivered): keep those names.
    # @api private
    # @param partition [Integer]
    # @param offset [Integer]
    # @param error_number [Integer] librdkafka's error code, 0 for none
    # @return [self]
    def resolve(partition, offset, error_number)
      @error = KafkaError.new(error_number) unless error_number.zero?
      @partition = partition
      @offset = offset
      self
    end

    # Records a failure whose KafkaError is already built (a fatal error,
    # which says more than the purge it caused).
    # @api private
    # @param partition [Integer]
    # @param offset [Integer]
    # @param kafka_error [KafkaError]
    # @return [self]
    def resolve_error(partition, offset, kafka_error)
      @error = kafka_error
      @partition = partition
      @offset = offset
      self
    end

    # @return [String] the report's line, or the topic and "pending"
    def inspect = pending? ? "#<#{self.class.name} topic=#{@topic.inspect} pending>" : super

    private

    def failure_class = @error.authentication? ? Errors::AuthenticationError : Errors::ProduceError
  end
end
