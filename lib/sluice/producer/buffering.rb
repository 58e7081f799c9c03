# frozen_string_literal: true

module Sluice
  class Producer
    # Producer#buffer, #buffer_many, #flush_sync and #flush_async: messages
    # collected in the producer (not in librdkafka) until a flush sends them
    # as one batch. Middleware runs and messages are validated when they are
    # buffered, not again when they are flushed.
    module Buffering
      # @return [Integer] messages now buffered
      # @raise [Errors::MessageInvalidError, Errors::ProducerClosedError]
      def buffer(message)
        ensure_open!
        message = @middleware.run(message)
        @client.validate(message)
        instrument_with("message.buffered", :message, message) { @buffer.push(message) }
      end

      # Buffers every message, or none when one is invalid.
      # @return [Integer] messages now buffered
      def buffer_many(messages)
        ensure_open!
        messages = @middleware.run_many(batch!(messages))
        messages.each { |message| @client.validate(message) }
        instrument_with("messages.buffered", :messages, messages) { @buffer.concat(messages) }
      end

      # The messages buffered and not yet flushed (a copy).
      def buffered = @buffer.messages

      # Sends everything buffered and waits for the delivery reports.
      # @return [Array<DeliveryReport>]
      # @raise [Errors::ProduceManyError] and what #produce_many_sync raises; the
      #   messages that never reached librdkafka are buffered again
      def flush_sync = flush_buffer(:sync)

      # Sends everything buffered. @return [Array<DeliveryHandle>]
      def flush_async = flush_buffer(:async)

      private

      def flush_buffer(mode)
        messages = @buffer.take
        return [] if messages.empty?

        instrument_with(mode == :sync ? "buffer.flushed_sync" : "buffer.flushed_async", :messages, messages) { dispatch_buffered(messages, mode) }
      end

      # Only messages librdkafka never took go back: those it took are on
      # their way (their handles say how they end), and buffering them again
      # would send them twice.
      def dispatch_buffered(messages, mode)
        handles = dispatch_many(messages)
        mode == :sync ? wait_all(handles) : handles
      rescue Errors::ProduceManyError => e
        @buffer.restore(messages.drop(e.dispatched.size))
        raise
      rescue Errors::BaseError
        @buffer.restore(messages)
        raise
      end
    end
  end
end
