# frozen_string_literal: true

module Sluice
  class Consumer
    module Failure
      # Consumer's side of its failure policies: the Policy of a read, and
      # DeadLetters that know the consumer (its group, its secrets, the
      # settings a producer of its own is made from).
      # @api private
      module Reading
        private

        # retries: and dead_letter: of a read (Failure), nil without them. A
        # transactional dead letter commits its message's offset in the
        # transaction: past a lower offset another block has not finished, a
        # crash would skip that one, so it takes one block at a time.
        def failure_policy(retries, dead_letter, parallel)
          policy = Failure.policy(retries: retries, dead_letter: dead_letter, stopped: @inbox.method(:stopped?),
                                  instrument: method(:instrument), host: method(:dead_letters))
          if parallel && policy&.transactional?
            raise ArgumentError, "a transactional dead_letter producer commits offsets in its transaction: it needs concurrency: 1"
          end

          policy
        end

        # Failure's DeadLetters for this consumer: without a producer, one of its
        # own, made from the consumer's settings at the first dead letter.
        def dead_letters(topic, producer, partitioner)
          Failure::DeadLetters.new(topic: topic, producer: producer, partitioner: partitioner, consumer: self,
                                   group: @config.kafka_setting("group.id"), kafka: @config.kafka,
                                   make_producer: producer ? nil : method(:dead_letter_producer))
        end

        def dead_letter_producer
          kafka = @config.kafka.reject { |name, _| Failure::DeadLetters::CONSUMER_ONLY.match?(name.to_s) }
          settings = @config
          monitor = @monitor
          id = "#{@id}.dead_letters"
          Producer.new do |config|
            config.kafka = kafka
            config.id = id
            config.logger = settings.logger
            config.monitor = monitor
            config.polling.mode = settings.polling.mode
            config.polling.poller = settings.polling.poller
          end
        end
      end
    end
  end
end
