# frozen_string_literal: true

module Sluice
  module Testing
    # Testing::Consumer's reads with retries: and dead_letter:
    # (Sluice::Consumer::Failure, the real consumer's policies): dead letters
    # go to the producer given, an in-memory one for have_produced; their
    # source_consumer_group is the double's id. Its reads go through the
    # double's own steps (reading, take, handle), a policy (or none) around
    # each block; a backoff cut short by #stop ends the read as a stop does.
    # @api private
    module FailurePolicy
      private

      # One message (batch: false) or batch at a time, each handled as the double handles a block.
      def read_each(count, policy, batch:, &block)
        reading do
          while (taken = take(count))
            subject = batch ? taken : taken.first
            handle(taken) { policy ? policy.run(subject, taken, &block) : block.call(subject) }
          end
        end
      rescue Sluice::Consumer::Failure::Abandoned
        nil
      end

      # each_message(concurrency:) over the double (Testing::Inbox), the block wrapped in the policy.
      def read_parallel(settings, policy, block)
        reading { Inbox.reading(self, settings, policy ? policy.wrap(block) : block).run }
      rescue Sluice::Consumer::Failure::Abandoned
        nil
      end

      # Sluice::Consumer's retries: and dead_letter: (Consumer::Failure), without events: a double has no monitor.
      def failure_policy(retries, dead_letter)
        Sluice::Consumer::Failure.policy(retries: retries, dead_letter: dead_letter, stopped: method(:stopping?),
                                         instrument: ->(_name, _payload) {}, host: method(:dead_letters))
      end

      def dead_letters(topic, producer, partitioner)
        unless producer
          raise ArgumentError,
                "Testing::Consumer's dead_letter needs { topic:, producer: } (an in-memory producer: Sluice::Clients::Buffered)"
        end

        Sluice::Consumer::Failure::DeadLetters.new(topic: topic, producer: producer, partitioner: partitioner, consumer: self, group: @id,
                                                   kafka: {})
      end
    end
  end
end
