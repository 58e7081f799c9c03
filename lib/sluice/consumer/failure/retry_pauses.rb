# frozen_string_literal: true

module Sluice
  class Consumer
    module Failure
      # The reader's side of retry topics: a message of a retry topic that is
      # not due yet is not started. Its partition is paused (librdkafka stops
      # fetching it, what is buffered of it is given back) and goes back to it
      # (a seek: read again, nothing skipped), and is resumed once the message
      # is due, by the reader between two takes: no worker sleeps and nothing
      # polls the partition meanwhile. The partition's later messages wait
      # with it: they were sent there later, so are due later.
      #
      # It stands in front of a concurrent read's PartitionShares (the same
      # questions, asked at the same points: ParallelReading), and is asked by
      # a one-at-a-time each_message directly.
      # @api private
      class RetryPauses
        include PausedPartitions
        include Shared::Clock

        # @param retry_topics [RetryTopics]
        # @param pause [#call] Consumer#pause(topic, partition)
        # @param resume [#call] Consumer#resume(topic, partition)
        # @param rewind [#call] Consumer#rewind(messages)
        # @param shares [PartitionShares, PartitionShares::None] what a concurrent read asks besides
        def initialize(retry_topics:, pause:, resume:, rewind:, instrument:, shares: PartitionShares::None)
          @retry_topics = retry_topics
          @pause = pause
          @resume = resume
          @rewind = rewind
          @instrument = instrument
          @shares = shares
          @paused = {} # [topic, partition] => when it is due (Shared::Clock#now)
        end

        # Takes the message back when it is not due (or when the shares do).
        # @return [Boolean] taken back: not to be started
        def take_back?(message, waiting = 0) = hold?(message) || @shares.take_back?(message, waiting)

        # Resumes what is due, then what the shares resume.
        def resume_drained(&)
          resume_due
          @shares.resume_drained(&)
        end

        # A paused partition given up stays in the list: resumed when due all
        # the same (a resume of a partition no longer ours is nothing), so one
        # assigned again is never left paused.
        def rebalanced(given_up) = @shares.rebalanced(given_up)

        # The read ends: what it paused is fetched again (the next read pauses it again if need be).
        def resume_all
          @paused.each_key { |pair| resume(pair) }
          @paused.clear
          @shares.resume_all
        end

        # Resumes the partitions whose message is due.
        def resume_due
          return if @paused.empty?

          time = now
          @paused.reject! { |pair, due| due <= time && resume(pair) }
        end

        # @return [Integer, nil] ms until the next paused partition is due (nil: none paused)
        def next_due_ms
          return if @paused.empty?

          [((@paused.each_value.min - now) * 1000).ceil, 0].max
        end

        # @return [Array<Array(String, Integer)>] the partitions paused until a message is due
        def paused = @paused.keys

        private

        def hold?(message)
          due_at = @retry_topics.due_at(message) or return false
          wait = due_at - Time.now.to_f # the due time is the wall clock's (another process set it)
          return false unless wait.positive?

          pair = [message.topic, message.partition]
          @pause.call(*pair) unless @paused.key?(pair)
          @paused[pair] = now + wait
          @rewind.call([message])
          @instrument.call("consumer.retry_waiting", topic: message.topic, partition: message.partition, offset: message.offset, wait: wait)
          true
        rescue Errors::ConsumerStateError # no longer assigned: nothing to hold
          false
        end
      end
    end
  end
end
