# frozen_string_literal: true

module Sluice
  class Consumer
    module Failure
      # Produces failed messages to the dead-letter topic with everything they
      # had (key, payload, headers, timestamp), and headers naming where they
      # came from and why: Karafka Pro's source_* names (its tooling and
      # Karafka::Pro::Admin::DeadLetterQueues.copy read them), and the error.
      # #deliver returns only once every dead letter is acknowledged, so the
      # read stores a message's offset after its dead letter is safe (a crash
      # in between reads it again: at least once). A transactional producer
      # sends the dead letters and the messages' offsets in one transaction.
      # @api private
      class DeadLetters
        # The consumer's properties a producer of its own has no use for
        # (librdkafka would warn of each at its creation).
        CONSUMER_ONLY = /\A(group\.|auto\.offset\.reset|enable\.auto\.|auto\.commit\.|session\.timeout|heartbeat\.interval|
                         partition\.assignment|isolation\.level|fetch\.|queued\.|max\.poll\.interval|enable\.partition\.eof|
                         check\.crcs|consume\.callback|coordinator\.query)/x
        # Longest error message a header carries (bytes): a message is not a log.
        MAX_ERROR_MESSAGE = 1024

        # @return [String] the dead-letter topic
        attr_reader :topic

        # @param producer [Producer, nil] nil: made by make_producer at the first dead letter, closed by #close
        # @param partitioner [Symbol, #call] :same (the message's partition
        #   number when the topic has it, else by key), :key, or (message,
        #   partition_count) => partition
        # @param consumer [Consumer] what transaction_mark_as_consumed names
        # @param group [String] the consumer group (source_consumer_group)
        # @param kafka [Hash] librdkafka properties whose secrets an error's message must not carry
        def initialize(topic:, producer:, partitioner:, consumer:, group:, kafka:, make_producer: nil)
          @topic = topic
          @producer = producer
          @make_producer = make_producer
          @partitioner = partitioner
          @consumer = consumer
          @group = group.to_s
          @kafka = kafka
          @lock = Mutex.new
        end

        # Produces the messages' dead letters and waits for their acknowledgements.
        # @raise [Errors::BaseError] a produce, a delivery or the transaction failed: nothing is stored
        def deliver(messages, error, attempts)
          producer = producer!
          letters = messages.map { |message| letter(producer, message, error, attempts) }
          if producer.transactional?
            producer.transaction do
              producer.produce_many_async(letters)
              producer.transaction_mark_as_consumed(@consumer, messages)
            end
          else
            producer.produce_many_sync(letters)
          end
          nil
        end

        # @return [Boolean] the dead letters go through a transactional producer
        def transactional? = !!@producer&.transactional?

        # Closes the producer made for the dead letters (a producer given is the caller's).
        # @return [void]
        def close
          own = @lock.synchronize { @make_producer && @producer.tap { @producer = nil } }
          own&.close
        end

        private

        def producer! = @producer || @lock.synchronize { @producer ||= @make_producer.call }

        def letter(producer, message, error, attempts)
          { topic: @topic, key: message.key, payload: message.payload, timestamp: message.timestamp,
            headers: message.headers.merge(origin(message, error, attempts)) }.merge!(placement(producer, message)).compact
        end

        def origin(message, error, attempts)
          { "source_topic" => message.topic, "source_partition" => message.partition.to_s, "source_offset" => message.offset.to_s,
            "source_consumer_group" => @group, "source_attempts" => attempts.to_s,
            "error_class" => class_name(error.class), "error_message" => error_message(error) }
        end

        # An anonymous class (Class.new(StandardError)) is named by its nearest named superclass.
        def class_name(klass)
          klass = klass.superclass until klass.name
          klass.name
        end

        def error_message(error)
          text = Secrets.scrub(error.message.to_s, @kafka)
          text.bytesize > MAX_ERROR_MESSAGE ? "#{text.byteslice(0, MAX_ERROR_MESSAGE).scrub("")}…" : text
        end

        # By key is librdkafka's own choice for a message with a key (a
        # keyless one goes where its partitioner puts it): no partition given.
        def placement(producer, message)
          case @partitioner
          when :key then {}
          when :same then message.partition < producer.partition_count(@topic) ? { partition: message.partition } : {}
          else { partition: @partitioner.call(message, producer.partition_count(@topic)) }
          end
        end
      end
    end
  end
end
