# frozen_string_literal: true

module Sluice
  module Clients
    # Dummy that keeps every message it delivers, for a spec to look at
    # (WaterDrop's Clients::Buffered).
    #
    # Messages are kept as the producer handed them over (after middleware).
    # A transaction's messages are kept when it commits; an abort drops them.
    #
    # @example
    #   producer = Sluice::Producer.new { |config| config.client_class = Sluice::Clients::Buffered }
    #   producer.produce_sync(topic: "events", payload: "hello")
    #   producer.client.messages         # => [{ topic: "events", payload: "hello" }]
    #   producer.client.messages_for("events")
    #   producer.client.reset            # between examples
    class Buffered < Dummy
      def initialize(kafka_pairs)
        super
        @messages = []
        @pending = nil # the open transaction's messages
      end

      # Every message kept so far, each a frozen copy of the message Hash the
      # producer handed over.
      # @return [Array<Hash>] in the order produced (a new Array: later messages don't show up in it)
      def messages = @lock.synchronize { @messages.dup }

      # The kept messages of one topic, in the order produced.
      # @param topic [String, Symbol] compared as a String, so :events finds "events"
      # @return [Array<Hash>]
      def messages_for(topic)
        topic = topic.to_s
        @lock.synchronize { @messages.select { |message| message[:topic].to_s == topic } }
      end

      # Forgets every message kept (and those of an open transaction), say
      # between examples that share a producer. Offsets are not reset.
      # @return [nil]
      def reset
        @lock.synchronize do
          @messages.clear
          @pending&.clear
        end
        nil
      end

      # Starts keeping the transaction's messages apart until it ends.
      def begin_transaction
        @lock.synchronize { @pending = [] }
        super
      end

      # Keeps the transaction's messages, after those kept before it.
      def commit_transaction(timeout_ms)
        @lock.synchronize { @messages.concat(@pending.to_a).tap { @pending = nil } }
        super
      end

      # Drops the transaction's messages: #messages never shows them.
      def abort_transaction(timeout_ms)
        @lock.synchronize { @pending = nil }
        super
      end

      private

      def kept(message, _topic, _handle)
        (@pending || @messages) << message.dup.freeze
      end
    end
  end
end
