# frozen_string_literal: true

module Sluice
  module Clients
    # Dummy that keeps every message it delivers, for a spec to look at
    # (WaterDrop's Clients::Buffered):
    #
    #   producer = Sluice::Producer.new { |config| config.client_class = Sluice::Clients::Buffered }
    #   producer.produce_sync(topic: "events", payload: "hello")
    #   producer.client.messages         # => [{ topic: "events", payload: "hello" }]
    #   producer.client.messages_for("events")
    #   producer.client.reset            # between examples
    #
    # Messages are kept as the producer handed them over (after middleware).
    # A transaction's messages are kept when it commits; an abort drops them.
    class Buffered < Dummy
      def initialize(kafka_pairs)
        super
        @messages = []
        @pending = nil # the open transaction's messages
      end

      # @return [Array<Hash>] every message kept, in the order produced (a copy)
      def messages = @lock.synchronize { @messages.dup }

      # @return [Array<Hash>] the messages kept for topic (a String or Symbol)
      def messages_for(topic)
        topic = topic.to_s
        @lock.synchronize { @messages.select { |message| message[:topic].to_s == topic } }
      end

      # Forgets every message kept (and those of an open transaction).
      def reset
        @lock.synchronize do
          @messages.clear
          @pending&.clear
        end
        nil
      end

      def begin_transaction
        @lock.synchronize { @pending = [] }
        super
      end

      def commit_transaction(timeout_ms)
        @lock.synchronize { @messages.concat(@pending.to_a).tap { @pending = nil } }
        super
      end

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
