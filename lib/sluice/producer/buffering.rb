# frozen_string_literal: true

module Sluice
  class Producer
    # The messages a producer holds until a flush sends them as one batch
    # (Producer#buffer, #flush_sync, #flush_async), and what becomes of them
    # when it closes. One per producer, holding all of that state: the
    # Buffer, and which fiber is close's final flush (Producer#ensure_open!
    # lets that one through).
    #
    # It asks the producer's Transactions whether one is open (and runs a
    # close's flush in one of its own), and is handed the producer's batch
    # dispatch (Producer#dispatch_many: validation was done when the messages
    # were buffered).
    # @api private
    class Buffering
      # @param id [String] the producer's
      # @param monitor [Monitor] the producer's
      # @param transactions [Transactions] the producer's
      # @param dispatch [#call] (messages, refusal:) -> handles: enqueues a batch, or raises
      #   Errors::ProduceManyError with what it enqueued
      def initialize(id:, monitor:, transactions:, dispatch:)
        @id = id
        @monitor = monitor
        @transactions = transactions
        @dispatch = dispatch
        @buffer = Buffer.new
        @final_flush = nil
      end

      # @return [Integer] messages now buffered
      def push(message) = @buffer.push(message)

      # @return [Integer] messages now buffered
      def concat(messages) = @buffer.concat(messages)

      # @return [Array<Hash>] a copy of what is buffered
      def messages = @buffer.messages

      # Empties the buffer. @return [Array<Hash>] what it held
      def take = @buffer.take

      # Enqueues messages taken from the buffer. Only messages librdkafka
      # never took go back, in front: those it took are on their way (their
      # handles say how they end), and buffering them again would send them
      # twice.
      # @return [Array<DeliveryHandle>]
      def dispatch(messages, refusal:)
        @dispatch.call(messages, refusal: refusal)
      rescue Errors::ProduceManyError => e
        @buffer.restore(messages.drop(e.dispatched.size))
        raise
      rescue Errors::BaseError # refused before anything was enqueued
        @buffer.restore(messages)
        raise
      end

      # Whether the calling fiber is close's final flush.
      def final_flush? = @final_flush.equal?(Fiber.current)

      # close: what is still buffered is sent (then waited for with the rest
      # of close's deliveries); what cannot be is reported as purged, each
      # message as `message.purged`, as close reports what it purges.
      # A transactional producer's buffer goes in a transaction of its own,
      # when no other is open (close has settled those by now).
      # @return [Integer] messages dropped
      def flush_at_close
        messages = @buffer.take
        return 0 if messages.empty?
        return purged(messages, KafkaError.new(PURGED, "closing: another transaction is still open")) if @transactions.current

        @final_flush = Fiber.current
        refusal = "buffer.flush_at_close" # its messages are reported as purged too
        @transactions.enabled? ? @transactions.run { @dispatch.call(messages, refusal: refusal) } : @dispatch.call(messages, refusal: refusal)
        0
      rescue Errors::ProduceManyError => e
        purged(messages.drop(e.dispatched.size), e.kafka_error)
      rescue Errors::BaseError => e
        purged(messages, e.respond_to?(:kafka_error) ? e.kafka_error : KafkaError.new(PURGED, e.message))
      ensure
        @final_flush = nil
      end

      private

      def purged(messages, error)
        messages.each do |message|
          @monitor.instrument("message.purged", producer_id: @id, topic: message[:topic], label: message[:label], error: error)
        end
        messages.size
      end
    end
  end
end
