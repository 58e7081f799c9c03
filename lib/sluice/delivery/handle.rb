# frozen_string_literal: true

module Sluice
  module Delivery
    # The pending result of produce_async. Once resolved, the handle is its own
    # DeliveryReport: one object per message in flight, no second allocation
    # when the report arrives (this is the hot path of every produce).
    #
    # Three instance variables, never more: Ruby 3.1 keeps three in the object
    # and, once any instance of a class has set a fourth name, gives every
    # instance allocated after a table (malloc'd if it outlives a GC). So:
    # - @topic is the topic, or Details (topic, label, error) for a message
    #   with a label or a failed delivery (both rare);
    # - @partition is the producer's DeliveryNotifier until the report replaces
    #   it (nobody waits on a resolved handle);
    # - @offset is nil while pending.
    #
    # The native client builds handles and records successful deliveries
    # (@partition, then @offset) itself, in one file:
    # ext/sluice/delivery_handle.c. See it before renaming a field.
    class Handle < Delivery::Report
      # A handle's rare fields, beside its topic.
      Details = Struct.new(:topic, :label, :error)
      private_constant :Details

      # Built natively for each message produced.
      # @api private
      # @param notifier [Delivery::Notifier] wakes waiters when the report arrives
      # @param topic [String]
      # @param label [Object, nil] the message's `label:`
      def initialize(notifier, topic, label) # rubocop:disable Lint/MissingSuper -- a report whose fields arrive later
        @topic = label.nil? ? topic : Details.new(topic, label, nil)
        @partition = notifier
        @offset = nil
      end

      # @return [String]
      def topic = (t = @topic).is_a?(Details) ? t.topic : t

      # @return [Integer, nil] nil while pending
      def partition = @offset.nil? ? nil : @partition

      # @return [Object, nil] the message's `label:`
      def label = (t = @topic).is_a?(Details) ? t.label : nil

      # @return [KafkaError, nil]
      def error = (t = @topic).is_a?(Details) ? t.error : nil

      # Pending until the delivery report arrives (the native drain sets `@offset` last).
      # @return [Boolean]
      def pending? = @offset.nil?

      # @return [Delivery::Report, nil] this handle once resolved, nil while pending
      def report = @offset.nil? ? nil : self

      # Waits for the delivery report.
      # @param max_wait_timeout [Numeric] ms; default: the producer's max_wait_timeout
      # @param raise_response_error [Boolean] raise ProduceError for a failed delivery
      # @return [Delivery::Report]
      # @raise [Errors::WaitTimeoutError] the handle stays pending and can be waited on again
      # @raise [Errors::ProduceError]
      def wait(max_wait_timeout: nil, raise_response_error: true)
        notifier = @partition # read before @offset: a report replaces @partition, then sets @offset
        notifier.wait_for(self, max_wait_timeout || notifier.max_wait_timeout) if @offset.nil?
        failure = error if raise_response_error
        raise failure_class(failure).new(failure, delivery_report: self) if failure

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
        record(partition, offset, error_number.zero? ? nil : KafkaError.new(error_number))
      end

      # Records a failure whose KafkaError is already built (a fatal error,
      # which says more than the purge it caused).
      # @api private
      # @param partition [Integer]
      # @param offset [Integer]
      # @param kafka_error [KafkaError]
      # @return [self]
      def resolve_error(partition, offset, kafka_error) = record(partition, offset, kafka_error)

      # @return [String] the report's line, or the topic and "pending"
      def inspect = pending? ? "#<#{self.class.name} topic=#{topic.inspect} pending>" : super

      private

      def record(partition, offset, error)
        @topic = Details.new(topic, label, error) if error
        @partition = partition
        @offset = offset
        self
      end

      def failure_class(error) = error.authentication? ? Errors::AuthenticationError : Errors::ProduceError
    end
  end
  DeliveryHandle = Delivery::Handle # the public name: what #produce_async returns
  DeliveryReport = Delivery::Report # the public name: what a handle resolves to
end
