# frozen_string_literal: true

module Sluice
  # Ready-made listeners and helpers for a client's Monitor.
  module Instrumentation
    # One log line per producer event, like WaterDrop's LoggerListener:
    #
    # @example
    #   producer.monitor.subscribe(Sluice::Instrumentation::LoggerListener.new(Logger.new($stdout)))
    #
    # Produce, buffer, transaction and lifecycle events at info (the messages
    # themselves at debug, unless log_messages: false), purges at warn,
    # errors at error. Deliveries (`message.acknowledged`) and statistics are
    # not logged: one line per delivered message helps nobody.
    class LoggerListener
      # @param logger [Logger] where the lines go
      # @param log_messages [Boolean] also log each message (debug)
      def initialize(logger, log_messages: true)
        @logger = logger
        @log_messages = log_messages
      end

      # `message.produced_async`: info (the message at debug).
      def on_message_produced_async(event) = message_line(event, "Async producing of a message to '#{event[:message][:topic]}' topic")
      # `message.produced_sync`: info (the message at debug).
      def on_message_produced_sync(event) = message_line(event, "Sync producing of a message to '#{event[:message][:topic]}' topic")
      # `messages.produced_async`: info, the batch's size and topics (the messages at debug).
      def on_messages_produced_async(event) = messages_line(event, "Async producing of #{batch(event)}")
      # `messages.produced_sync`: info, the batch's size and topics (the messages at debug).
      def on_messages_produced_sync(event) = messages_line(event, "Sync producing of #{batch(event)}")
      # `message.buffered`: info (the message at debug).
      def on_message_buffered(event) = message_line(event, "Buffering of a message to '#{event[:message][:topic]}' topic")
      # `messages.buffered`: info (the messages at debug).
      def on_messages_buffered(event) = messages_line(event, "Buffering of #{batch(event)}")
      # `buffer.flushed_async`: info (the messages at debug).
      def on_buffer_flushed_async(event) = messages_line(event, "Async flushing of #{event[:messages].size} messages from the buffer")
      # `buffer.flushed_sync`: info (the messages at debug).
      def on_buffer_flushed_sync(event) = messages_line(event, "Sync flushing of #{event[:messages].size} messages from the buffer")
      # `buffer.purged`: info.
      def on_buffer_purged(event) = info(event, "Successfully purging buffer")

      # `message.purged`: warn, with the purge's error code.
      def on_message_purged(event)
        warn(event, "Message to '#{event[:topic]}' topic purged before delivery (#{event[:error]&.code})")
      end

      # `error.occurred` (from producers and consumers): error, with the error and its type.
      def on_error_occurred(event)
        @logger.error("[#{client_id(event)}] Error occurred: #{event[:error]} - #{event[:type]}")
      end

      # `transaction.started`: info.
      def on_transaction_started(event) = info(event, "Starting transaction")
      # `transaction.committed`: info.
      def on_transaction_committed(event) = info(event, "Committing transaction")
      # `transaction.aborted`: info.
      def on_transaction_aborted(event) = info(event, "Aborting transaction")
      # `transaction.finished`: info, how long the transaction took.
      def on_transaction_finished(event) = info(event, "Processing transaction took #{ms(event)} ms")
      # `producer.connected`: info.
      def on_producer_connected(event) = info(event, "Producer connected")
      # `producer.closing`: info.
      def on_producer_closing(event) = info(event, "Closing producer")
      # `producer.closed`: info.
      def on_producer_closed(event) = info(event, "Producer closed")
      # `producer.reloaded`: info, the error that caused it and the attempt.
      def on_producer_reloaded(event) = info(event, "Producer successfully reloaded after #{event[:error]&.code} (attempt #{event[:attempt]})")

      private

      def message_line(event, text)
        info(event, took(event, text))
        debug(event, event[:message]) if @log_messages
      end

      def messages_line(event, text)
        info(event, took(event, text))
        debug(event, event[:messages]) if @log_messages
      end

      def batch(event)
        messages = event[:messages]
        "#{messages.size} messages to #{messages.map { |message| message[:topic] }.uniq.inspect} topics"
      end

      def took(event, text) = event[:time] ? "#{text} took #{ms(event)} ms" : text
      def ms(event) = event[:time].to_f.round(2)

      def info(event, text) = @logger.info("[#{client_id(event)}] #{text}")
      def warn(event, text) = @logger.warn("[#{client_id(event)}] #{text}")
      def debug(event, data) = @logger.debug { "[#{client_id(event)}] #{Shared::Shown.call(data)}" }

      # error.occurred comes from consumers too
      def client_id(event) = event[:producer_id] || event[:consumer_id] || event[:admin_id]
    end
  end
end
