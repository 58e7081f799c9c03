# frozen_string_literal: true

module Sluice
  class Consumer
    module Failure
      # Runs a block for a message (or a batch) up to `attempts` times, waiting
      # a Backoff between them, then hands the messages to DeadLetters, or
      # lets the last error end the read as it does without a policy. Only a
      # StandardError is retried: an interrupt (Thread#kill, Workers::Stop)
      # or an exit goes through at once.
      # @api private
      class Policy
        # @param dead_letters [DeadLetters, nil]
        # @param stopped [#call] true once the read was stopped: no retry starts then
        # @param instrument [#call] (event name, payload)
        def initialize(attempts:, backoff:, dead_letters:, stopped:, instrument:)
          @attempts = attempts
          @backoff = backoff
          @dead_letters = dead_letters
          @stopped = stopped
          @instrument = instrument
        end

        # Yields subject (a Message, or the batch) until the block returns;
        # returns once it did, or once its messages' dead letters were
        # acknowledged.
        # @param messages [Array<Message>] the subject's messages
        # @raise [Abandoned] stopped before a retry
        # @raise the block's last error, or the dead letters' failure
        def run(subject, messages)
          attempt = 1
          begin
            yield subject
          rescue StandardError => e
            raise if e.is_a?(Abandoned)

            if attempt < @attempts
              again(messages, attempt, e)
              attempt += 1
              retry
            end
            give_up(messages, attempt, e)
          end
        end

        # The block wrapped, for a read that calls it (each_message(concurrency:)).
        # @return [Proc]
        def wrap(block) = proc { |message| run(message, [message], &block) }

        # @return [Boolean] its dead letters go through a transactional producer
        def transactional? = !!@dead_letters&.transactional?

        # Closes a producer the dead letters made for themselves.
        def close = @dead_letters&.close

        private

        def again(messages, attempt, error)
          raise Abandoned, "stopped before retrying #{origin(messages)}" if @stopped.call

          delay = @backoff.delay(attempt)
          @instrument.call("consumer.retry", event(messages, error).merge!(attempt: attempt, backoff: delay))
          raise Abandoned, "stopped while waiting to retry #{origin(messages)}" unless @backoff.wait(delay, @stopped)
        end

        def give_up(messages, attempts, error)
          raise error unless @dead_letters

          @dead_letters.deliver(messages, error, attempts)
          @instrument.call("consumer.dead_lettered", event(messages, error).merge!(attempts: attempts, dead_letter_topic: @dead_letters.topic))
        end

        def event(messages, error)
          first = messages.first
          { topic: first.topic, partition: first.partition, offset: first.offset, count: messages.size, error: error }
        end

        def origin(messages) = "#{messages.first.topic}/#{messages.first.partition}@#{messages.first.offset}"
      end
    end
  end
end
