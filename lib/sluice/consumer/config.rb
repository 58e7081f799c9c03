# frozen_string_literal: true

module Sluice
  class Consumer
    # Settings of one consumer, filled in the block given to Consumer.new and
    # frozen once valid.
    class Config < Shared::ClientConfig
      # How long (ms) the consumer's blocking calls may take: a synchronous
      # commit, committed, lag, seek, and close's leaving of the group.
      attr_accessor :max_wait_timeout

      # poll's store: when a call does not pass it (Consumer#poll): true, and
      # each poll stores the offset of the message the poll before it returned.
      # Cheaper than passing store: true to every call: Ruby hands a C
      # method's keywords over in a new Hash (0.14 µs a message in
      # bench/RESULTS.md, "poll and its offsets").
      # @return [Boolean] default false
      attr_accessor :poll_store

      def initialize
        super
        @max_wait_timeout = 10_000
        @poll_store = false
      end

      # Checks every setting (Consumer.new calls it before freezing the config).
      # @return [self]
      # @raise [Errors::ConfigurationInvalidError] naming the first bad setting, or without "group.id"
      def validate!
        super
        positive!(:max_wait_timeout, @max_wait_timeout)
        invalid!("poll_store must be true or false, got #{@poll_store.inspect}") unless [true, false].include?(@poll_store)
        group = kafka_setting("group.id")
        invalid!('kafka needs "group.id": a consumer reads as a member of a consumer group') if group.nil? || group.empty?
        validate_group_protocol!
        self
      end

      # The classic protocol's member settings that KIP-848's consumer
      # protocol ("group.protocol": "consumer") moves to the broker (or to
      # another setting), and where each lives there.
      CLASSIC_ONLY = {
        "session.timeout.ms" => "the broker's group.consumer.session.timeout.ms, or the group's consumer.session.timeout.ms " \
                                "(kafka-configs.sh --entity-type groups)",
        "heartbeat.interval.ms" => "the broker's group.consumer.heartbeat.interval.ms, or the group's consumer.heartbeat.interval.ms " \
                                   "(kafka-configs.sh --entity-type groups)",
        "partition.assignment.strategy" => 'the client\'s "group.remote.assignor" ("uniform" or "range"; the broker\'s group.consumer.assignors)',
        "group.protocol.type" => "nothing: the consumer protocol has no protocol type"
      }.freeze

      # @return [Boolean] the group protocol is KIP-848's ("group.protocol": "consumer")
      def consumer_protocol? = kafka_value("group.protocol") == "consumer"

      # librdkafka's prefetch pauses once the consumer queue holds
      # queued.min.messages (100,000) or queued.max.messages.kbytes (64 MB of
      # payload), then waits fetch.queue.backoff.ms (1,000) before it looks
      # again: a reader faster than one queue-full per second idles. 10 ms
      # reads at full speed (one consumer, 100-byte messages, bundled 2.14.2:
      # each_message 152k -> 839k msg/s). With prefetching resumed that soon,
      # a queue of 100,000 messages is only a working set too big for the
      # caches (each message keeps its fetch response alive): 15,000 read
      # faster (one run each of three, `ruby bench/consumer_cell.rb`, medians:
      # one consumer each_message 518k -> 758k, each_batch 686k -> 1.01 M;
      # six in one process each_batch 537k -> 915k msg/s, RSS 430 -> 220 MB);
      # 5,000 starved one consumer (548k each_batch). Older librdkafka (the
      # system's, < 2.2) has no backoff setting: its fixed second needs the
      # big queue, so there both stay librdkafka's.
      PREFETCH_BACKOFF_MS = "10"
      # queued.min.messages given with PREFETCH_BACKOFF_MS (see there).
      PREFETCH_MESSAGES = "15000"
      # Members learn of a rebalance from a heartbeat's answer, and a rebalance
      # completes once every member rejoined; a member that joins meanwhile
      # cannot leave (close) before that: the broker answers one request of a
      # connection at a time, and holds the JoinGroup. At librdkafka's 3 s a
      # close during a group's forming took up to 2.97 s, at 1 s up to 1.93 s
      # (six consumers closed one after another, /tmp runs of
      # close_after_rebalance_spec's scenario); rebalances finish sooner too.
      # Still well under a third of session.timeout.ms (45 s), as Kafka asks.
      HEARTBEAT_INTERVAL_MS = "1000"

      # What librdkafka gets: the properties as given, with the offset store
      # left to sluice (offsets are stored once a message was processed), a
      # 1 s heartbeat, and a short prefetch backoff with a smaller queue,
      # unless the application chose otherwise.
      # @return [Array<Array(String, String)>]
      def kafka_pairs
        pairs = super
        pairs << ["enable.auto.offset.store", "false"] unless kafka_setting("enable.auto.offset.store")
        pairs << ["heartbeat.interval.ms", HEARTBEAT_INTERVAL_MS] if default_heartbeat?
        if prefetch_backoff?
          pairs << ["fetch.queue.backoff.ms", PREFETCH_BACKOFF_MS]
          pairs << ["queued.min.messages", PREFETCH_MESSAGES] unless kafka_setting("queued.min.messages")
        end
        pairs
      end

      # librdkafka commits stored offsets in the background (and close commits
      # them), unless the application commits itself (exactly-once through a
      # producer's transaction, say).
      # @return [Boolean]
      def auto_commit? = kafka_value("enable.auto.commit")

      # @return [Integer] librdkafka's max.poll.interval.ms (its default when not given)
      def max_poll_interval_ms = kafka_value("max.poll.interval.ms")

      private

      def validate_group_protocol!
        return unless consumer_protocol?

        CLASSIC_ONLY.each do |name, instead|
          next unless kafka_setting(name)

          invalid!(%(#{name} is a setting of the classic group protocol; with "group.protocol": "consumer" (KIP-848) it is #{instead}))
        end
      end

      # Unless the application chose one, or a session so short that 1 s is
      # more than a third of it. Never under KIP-848's protocol: there the
      # broker sets the heartbeat, and librdkafka refuses the setting.
      def default_heartbeat?
        return false if kafka_setting("heartbeat.interval.ms") || consumer_protocol?

        kafka_value("session.timeout.ms") >= 3 * Integer(HEARTBEAT_INTERVAL_MS)
      end

      def prefetch_backoff?
        return false if kafka_setting("fetch.queue.backoff.ms")

        Gem::Version.new(Sluice.librdkafka_version) >= Gem::Version.new("2.2.0")
      end
    end
  end
end
