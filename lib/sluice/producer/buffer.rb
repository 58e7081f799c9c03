# frozen_string_literal: true

module Sluice
  class Producer
    # Messages waiting for a flush. Every operation is atomic: a flush takes
    # exactly the messages buffered before it, and what a failed flush gives
    # back goes in front of what was buffered meanwhile, so the order holds.
    class Buffer
      def initialize
        @mutex = Mutex.new
        @messages = []
      end

      # @return [Integer] messages now buffered
      def push(message) = @mutex.synchronize { @messages.push(message).size }

      # @return [Integer] messages now buffered
      def concat(messages) = @mutex.synchronize { @messages.concat(messages).size }

      # Empties the buffer. @return [Array<Hash>] what it held
      def take
        @mutex.synchronize do
          taken = @messages
          @messages = []
          taken
        end
      end

      # Puts messages a flush could not hand to librdkafka back in front.
      def restore(messages)
        @mutex.synchronize { @messages = messages + @messages } unless messages.empty?
      end

      # @return [Integer] messages now buffered
      def size = @mutex.synchronize { @messages.size }
      def empty? = size.zero?

      # A copy: the buffer itself keeps changing under other threads.
      def messages = @mutex.synchronize { @messages.dup }
    end
  end
end
