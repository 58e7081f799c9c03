# frozen_string_literal: true

module Sluice
  module Testing
    # Testing::Consumer's retries: and dead_letter: (Sluice::Consumer::Failure,
    # the real consumer's policies): dead letters go to the producer given,
    # an in-memory one for have_produced; their source_consumer_group is the
    # double's id.
    # @api private
    module FailurePolicy
      private

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
