# frozen_string_literal: true

module Sluice
  class Consumer
    module Failure
      # Consumer's side of its failure policies: the Policy of a read, and
      # DeadLetters that know the consumer (its group, its secrets, the
      # settings a producer of its own is made from).
      # @api private
      module Reading
        # How long (ms) the consumer's own producer waits for a dead letter's
        # acknowledgement: as long as librdkafka tries to deliver it (its
        # message.timeout.ms, 300 s, which a consumer's settings cannot
        # carry), and 5 s more for the report. A broker's failover then holds
        # the key's lane; the producer's 5 s default ended the read (and its
        # process) under a node's SIGKILL (spec/cluster/failure_faults_spec.rb).
        OWN_PRODUCER_WAIT = 305_000

        private

        # retries: and dead_letter: of a read (Failure), nil without them. A
        # transactional dead letter commits its message's offset in the
        # transaction: past a lower offset another block has not finished, a
        # crash would skip that one, so it takes one block at a time.
        def failure_policy(retries, dead_letter, parallel, retry_topics = nil)
          policy = Failure.policy(retries: retries, dead_letter: dead_letter, stopped: @inbox.method(:stopped?),
                                  instrument: method(:instrument), host: method(:dead_letters), retry_topics: retry_topics)
          if parallel && policy&.transactional?
            raise ArgumentError, "a transactional dead_letter producer commits offsets in its transaction: it needs concurrency: 1"
          end

          policy
        end

        # With retry_topics:, the pauses of retry topics' partitions until their
        # messages are due (in front of shares, a concurrent read's), and the
        # retry topics of the topics subscribed by name, subscribed too.
        # @param shares [PartitionShares, PartitionShares::None, nil] nil: a one-at-a-time read's
        # @return [RetryPauses, nil] shares themselves without retry topics
        def retry_pauses(policy, shares)
          return shares unless (topics = policy&.retry_topics)

          subscribe_retry_topics(topics)
          RetryPauses.new(retry_topics: topics, pause: method(:pause), resume: method(:resume), rewind: method(:rewind),
                          instrument: method(:instrument), shares: shares || PartitionShares::None)
        end

        # Subscribing again before the read joins costs no rebalance; a
        # pattern ("^orders.*") and an assignment are the caller's to cover.
        def subscribe_retry_topics(topics)
          names = (@subscription || []).reject { |topic| topic.start_with?("^") || topics.retry_topic?(topic) }
          missing = names.flat_map { |topic| topics.names(topic) } - @subscription.to_a
          subscribe(*@subscription, *missing) unless missing.empty?
        end

        # The next message, or nil once stopped; with retry pauses, the
        # paused partitions are resumed when due while waiting for it.
        def take_due(pauses)
          loop do
            pauses.resume_due
            wait = pauses.next_due_ms
            message = @inbox.take(wait)
            return message if message || wait.nil? || @inbox.stopped?
          end
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
            config.max_wait_timeout = OWN_PRODUCER_WAIT
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
