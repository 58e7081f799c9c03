# frozen_string_literal: true

module Sluice
  class Producer
    # Producer#buffer, #buffer_many, #flush_sync and #flush_async: messages
    # collected in the producer (not in librdkafka) until a flush sends them
    # as one batch. Middleware runs and messages are validated when they are
    # buffered, not again when they are flushed.
    module Buffering
      # Adds a message to the buffer, to be sent by the next #flush_sync or #flush_async.
      # @param message [Hash] as for Producer#produce_async
      # @return [Integer] messages now buffered
      # @raise [Errors::MessageInvalidError, Errors::ProducerClosedError]
      def buffer(message)
        ensure_open!
        message = @middleware.run(message)
        @client.validate(message)
        instrument_with("message.buffered", :message, message) { @buffer.push(message) }
      end

      # Buffers every message, or none when one is invalid.
      # @param messages [Array<Hash>]
      # @return [Integer] messages now buffered
      # @raise [Errors::MessageInvalidError, Errors::ProducerClosedError]
      def buffer_many(messages)
        ensure_open!
        messages = @middleware.run_many(batch!(messages))
        messages.each { |message| @client.validate(message) }
        instrument_with("messages.buffered", :messages, messages) { @buffer.concat(messages) }
      end

      # @return [Array<Hash>] the messages buffered and not yet flushed (a copy)
      def buffered = @buffer.messages

      # Sends everything buffered and waits for the delivery reports. A
      # message leaves the buffer once librdkafka took it, whatever the wait
      # does after: a WaitTimeoutError or a delivery the broker refused
      # (ProduceError) leave nothing behind to be sent twice; only what
      # librdkafka never took (ProduceManyError) goes back, in front.
      # @return [Array<DeliveryReport>]
      # @raise [Errors::ProduceManyError] and what #produce_many_sync raises
      def flush_sync = flush_buffer(:sync)

      # Sends everything buffered, without waiting for the reports.
      # @return [Array<DeliveryHandle>]
      # @raise [Errors::ProduceManyError] and what Producer#produce_many_async raises
      def flush_async = flush_buffer(:async)

      private

      def flush_buffer(mode)
        ensure_open!
        return transaction { flush_buffer(mode) } if needs_own_transaction?

        messages = @buffer.take
        return [] if messages.empty?

        instrument_with(mode == :sync ? "buffer.flushed_sync" : "buffer.flushed_async", :messages, messages) do
          handles = dispatch_buffered(messages, mode)
          mode == :sync ? wait_all(handles) : handles
        end
      end

      # Only messages librdkafka never took go back: those it took are on
      # their way (their handles say how they end), and buffering them again
      # would send them twice.
      def dispatch_buffered(messages, mode)
        dispatch_many(messages, refusal: mode == :sync ? "buffer.flush_sync" : "buffer.flush_async")
      rescue Errors::ProduceManyError => e
        @buffer.restore(messages.drop(e.dispatched.size))
        raise
      rescue Errors::BaseError # refused before anything was enqueued
        @buffer.restore(messages)
        raise
      end

      # close: what is still buffered is sent (then waited for with the rest
      # of close's deliveries); what cannot be is reported as purged, each
      # message as `message.purged`, as close reports what it purges.
      # A transactional producer's buffer goes in a transaction of its own,
      # when no other is open (close has settled those by now).
      # @return [Integer] messages dropped
      def flush_buffer_at_close
        messages = @buffer.take
        return 0 if messages.empty?

        return purged_at_close(messages, KafkaError.new(PURGED, "closing: another transaction is still open")) if transactional? && @transaction

        @final_flush = Fiber.current # ensure_open! lets this one through
        refusal = "buffer.flush_at_close" # its messages are reported as purged too
        transactional? ? transaction { dispatch_many(messages, refusal: refusal) } : dispatch_many(messages, refusal: refusal)
        0
      rescue Errors::ProduceManyError => e
        purged_at_close(messages.drop(e.dispatched.size), e.kafka_error)
      rescue Errors::BaseError => e
        purged_at_close(messages, e.respond_to?(:kafka_error) ? e.kafka_error : KafkaError.new(PURGED, e.message))
      ensure
        @final_flush = nil
      end

      def purged_at_close(messages, error)
        messages.each do |message|
          @monitor.instrument("message.purged", producer_id: @id, topic: message[:topic], label: message[:label], error: error)
        end
        messages.size
      end
    end
  end
end
