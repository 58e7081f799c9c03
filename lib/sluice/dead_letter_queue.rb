# frozen_string_literal: true

require "securerandom"

module Sluice
  # A dead-letter topic's messages read back (#each) or produced again
  # (#replay): `sluice dlq tail` and `sluice dlq replay` from Ruby. Both read
  # up to each partition's end as it was when they began, so a replay whose
  # messages fail again (and come back to this topic) ends.
  #
  # @example
  #   queue = Sluice::DeadLetterQueue.new("orders.dlq", kafka: { "bootstrap.servers": "127.0.0.1:9092" })
  #   queue.each { |letter| puts letter }  # origin and error of each
  #   queue.replay(where: ->(letter) { letter.error_class == "Timeout::Error" }) # => how many were produced back
  class DeadLetterQueue
    # Messages a replay produces (and waits for) at once.
    BATCH = 500
    # How long (ms) a read waits for a message before it looks whether every partition is at its end.
    POLL_WAIT = 250

    # @param topic [String] the dead-letter topic
    # @param kafka [Hash] librdkafka properties of the clients it makes (bootstrap.servers, credentials)
    # @param logger [Logger]
    # @raise [ArgumentError] topic is not a non-empty String
    def initialize(topic, kafka:, logger: Logger.new(nil))
      raise ArgumentError, "a dead-letter topic is a non-empty String, got #{topic.inspect}" unless topic.is_a?(String) && !topic.empty?

      @topic = topic
      @kafka = kafka
      @logger = logger
    end

    # Yields every dead letter from the topic's start to its end, outside any group.
    # @yieldparam letter [DeadLetter]
    # @return [Integer] how many were yielded
    def each
      count = 0
      read("sluice-dlq-tail-#{SecureRandom.hex(6)}", commit: false) do |batch| # a group of its own, never committed
        batch.each { |message| yield DeadLetter.new(message) }
        count += batch.size
      end
      count
    end

    # Produces the dead letters back, at least once: to the topic and
    # partition they came from (or to `to_topic`, partitioned by key), with their
    # key, payload, timestamp and own headers. Resumable: the position is the
    # group's committed offsets, stored once a batch's messages were
    # acknowledged, so a replay stopped half-way goes on where it stopped.
    # @param to_topic [String, nil] the topic to produce to (nil: each letter's source_topic and source_partition)
    # @param where [#call, Hash, nil] which letters: a callable taking the DeadLetter, or
    #   { header or "key" => value } all of which must match
    # @param group [String] the consumer group whose committed offsets are the position
    # @return [Integer] how many were produced
    # @raise [ArgumentError] a letter has no source_topic and no to_topic was given
    # @raise [Errors::BaseError] a produce failed: what was acknowledged before its batch stays replayed
    def replay(to_topic: nil, where: nil, group: "sluice-dlq-replay-#{@topic}")
      selected = selector(where)
      producer = Producer.new do |config|
        config.kafka = @kafka
        config.logger = @logger
      end
      count = 0
      read(group, commit: true) do |batch|
        letters = batch.map { |message| DeadLetter.new(message) }.select(&selected)
        producer.produce_many_sync(letters.map { |letter| replayed(letter, to_topic) }) unless letters.empty?
        count += letters.size
      end
      count
    ensure
      producer&.close
    end

    private

    def selector(where)
      return ->(_letter) { true } if where.nil?
      return where if where.respond_to?(:call)
      raise ArgumentError, "where: takes a callable or a Hash of header => value, got #{where.inspect}" unless where.is_a?(Hash)

      lambda do |letter|
        where.all? { |name, value| (name.to_s == "key" ? letter.message.key : letter.message.headers[name.to_s]) == value.to_s }
      end
    end

    def replayed(letter, to_topic)
      target = to_topic || letter.source_topic or
        raise ArgumentError, "#{letter.message.topic}/#{letter.message.partition}@#{letter.message.offset} has no source_topic: give to_topic:"
      message = { topic: target, key: letter.message.key, payload: letter.message.payload, headers: letter.original_headers,
                  timestamp: letter.message.timestamp }
      message[:partition] = letter.source_partition if to_topic.nil? && letter.source_partition
      message.compact
    end

    # Reads the topic from the group's committed offsets (the start when
    # none) up to each partition's end as it was now, a batch at a time;
    # with commit, commits after each batch the offsets it yielded (not
    # what came after the end: the next replay reads that).
    def read(group, commit:, &block)
      consumer = reader(group)
      ends = ends_now
      consumer.assign(@topic => ends.keys)
      positions = consumer.committed.fetch(@topic, {})
      left = ends.reject { |partition, high| positions.fetch(partition, -1) >= high || high.zero? }
      drain(consumer, left, commit, &block) unless left.empty?
    ensure
      consumer&.close
    end

    # Stops once every partition of `left` reached its end: its last message
    # was read, or librdkafka said it is at the end (a transaction's marker
    # or a deleted segment may end a partition below its last offset) and
    # nothing is left to hand out: an end reported while its messages still
    # wait in the consumer does not end it early.
    def drain(consumer, left, commit)
      ends = left.dup
      at_end = {}
      consumer.monitor.subscribe("consumer.partition_eof") { |event| at_end[event[:partition]] = event[:offset] }
      until left.empty?
        batch = take(consumer) { |message| left.key?(message.partition) && message.offset < ends[message.partition] }
        next left.delete_if { |partition, high| at_end.fetch(partition, -1) >= high } if batch.empty?

        yield batch
        consumer.commit(@topic => next_offsets(batch)) if commit
        batch.each { |message| left.delete(message.partition) if message.offset >= ends[message.partition] - 1 }
      end
    end

    # Up to BATCH wanted messages: what the consumer holds, or what comes within a poll's wait when it holds none.
    def take(consumer, &wanted)
      batch = []
      while batch.size < BATCH && (message = consumer.poll(batch.empty? ? POLL_WAIT : 0))
        batch << message if wanted.call(message)
      end
      batch
    end

    def next_offsets(messages) = messages.group_by(&:partition).transform_values { |list| list.map(&:offset).max + 1 }

    def ends_now
      admin = Admin.new do |config|
        config.kafka = @kafka
        config.logger = @logger
      end
      partitions = admin.describe_topic(@topic)[:partitions].map { |entry| entry[:partition] }
      partitions.to_h { |partition| [partition, admin.watermark_offsets(@topic, partition).last] }
    ensure
      admin&.close
    end

    # Commits only what #drain commits: the offsets of what it yielded.
    def reader(group)
      Consumer.new do |config|
        config.kafka = @kafka.merge("group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": false,
                                    "enable.partition.eof": true, "isolation.level": "read_committed")
        config.logger = @logger
      end
    end
  end
end
