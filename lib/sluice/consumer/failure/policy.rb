# frozen_string_literal: true

module Sluice
  class Consumer
    module Failure
      # Runs a block for a message (or a batch) up to `attempts` times, waiting
      # a Backoff between them, then hands the messages to DeadLetters, or
      # lets the last error end the read as it does without a policy; with
      # RetryTopics, to the next retry topic first (due after its delay). Only a
      # StandardError is retried: an interrupt (Thread#kill, Workers::Stop)
      # or an exit goes through at once.
      # @api private
      class Policy
        # @param dead_letters [DeadLetters, nil]
        # @param stopped [#call] true once the read was stopped: no retry starts then
        # @param instrument [#call] (event name, payload)
        # @param retry_topics [RetryTopics, nil]
        def initialize(attempts:, backoff:, dead_letters:, stopped:, instrument:, retry_topics: nil)
          @retry_topics = retry_topics
          @attempts = attempts
          @backoff = backoff
          @dead_letters = dead_letters
          @stopped = stopped
          @instrument = instrument
          @retrying = 0
          @count_lock = Mutex.new # taken only after a failure: the hot path never locks
        end

        # Messages whose block failed and will run again: waiting out a
        # backoff, running again, or (after the last attempt) being
        # dead-lettered. Read without the lock: an Integer ivar is read whole.
        # @return [Integer]
        attr_reader :retrying

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
              counted ||= count_retrying(1)
              again(messages, attempt, e)
              attempt += 1
              retry
            end
            give_up(messages, attempt, e)
          end
        ensure
          count_retrying(-1) if counted
        end

        # The block wrapped, for a read that calls it (each_message(concurrency:)).
        # @return [Proc]
        def wrap(block) = proc { |message| run(message, [message], &block) }

        # @return [RetryTopics, nil]
        attr_reader :retry_topics

        # @return [Boolean] its dead letters go through a transactional producer
        def transactional? = !!@dead_letters&.transactional?

        # Closes a producer the dead letters made for themselves.
        def close = @dead_letters&.close

        private

        # @return [true]
        def count_retrying(change)
          @count_lock.synchronize { @retrying += change }
          true
        end

        def again(messages, attempt, error)
          raise Abandoned, "stopped before retrying #{origin(messages)}" if @stopped.call

          delay = @backoff.delay(attempt)
          @instrument.call("consumer.retry", event(messages, error).merge!(attempt: attempt, backoff: delay))
          raise Abandoned, "stopped while waiting to retry #{origin(messages)}" unless @backoff.wait(delay, @stopped)
        end

        def give_up(messages, attempts, error)
          raise error unless @dead_letters

          attempts += @retry_topics.runs_before(messages.first) if @retry_topics
          hop = @retry_topics&.next_hop(messages.first.topic)
          return schedule(messages, attempts, error, *hop) if hop

          @dead_letters.deliver(messages, error, attempts)
          @instrument.call("consumer.dead_lettered", event(messages, error).merge!(attempts: attempts, dead_letter_topic: @dead_letters.topic))
        end

        # To the retry topic, due after delay; its offset is stored once that is acknowledged, as a dead letter's.
        def schedule(messages, attempts, error, topic, delay)
          due = ((Time.now.to_f + delay) * 1000).round
          @dead_letters.deliver(messages, error, attempts, topic: topic, due: due)
          @instrument.call("consumer.retry_scheduled", event(messages, error).merge!(attempts: attempts, retry_topic: topic, delay: delay, due: due))
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
