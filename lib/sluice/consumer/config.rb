# frozen_string_literal: true

module Sluice
  class Consumer
    # Settings of one consumer, filled in the block given to Consumer.new and
    # frozen once valid.
    class Config < ClientConfig
      # How long (ms) the consumer's blocking calls may take: a synchronous
      # commit, committed, lag, seek, and close's leaving of the group.
      attr_accessor :max_wait_timeout

      def initialize
        super
        @max_wait_timeout = 10_000
      end

      def validate!
        super
        positive!(:max_wait_timeout, @max_wait_timeout)
        group = kafka_setting("group.id")
        invalid!('kafka needs "group.id": a consumer reads as a member of a consumer group') if group.nil? || group.empty?
        self
      end

      # What librdkafka gets: the properties as given, with the offset store
      # left to sluice (offsets are stored once a message was processed) unless
      # the application chose otherwise.
      def kafka_pairs
        pairs = super
        pairs << ["enable.auto.offset.store", "false"] unless kafka_setting("enable.auto.offset.store")
        pairs
      end

      # librdkafka commits stored offsets in the background (and close commits
      # them), unless the application commits itself (exactly-once through a
      # producer's transaction, say).
      def auto_commit? = kafka_setting("enable.auto.commit") != "false"

      # librdkafka's max.poll.interval.ms (its default when not given).
      def max_poll_interval_ms = Integer(kafka_setting("max.poll.interval.ms") || 300_000)
    end
  end
end
