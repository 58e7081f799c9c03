# frozen_string_literal: true

module Sluice
  class ShareConsumer
    # Settings of one share consumer, filled in the block given to
    # ShareConsumer.new and frozen once valid.
    class Config < ClientConfig
      # The settings of a consumer-group member that a share-group member has
      # not, and where a share group keeps each (a group config is set with
      # Admin#alter_configs(group:), or Kafka's kafka-configs tool with --entity-type groups).
      CONSUMER_GROUP_ONLY = {
        "auto.offset.reset" => "the group config share.auto.offset.reset (default latest)",
        "isolation.level" => "the group config share.isolation.level",
        "enable.auto.commit" => "nothing: records are acknowledged, not offsets committed",
        "auto.commit.interval.ms" => "nothing: records are acknowledged, not offsets committed",
        "enable.auto.offset.store" => "nothing: records are acknowledged, not offsets stored",
        "session.timeout.ms" => "the group config share.session.timeout.ms",
        "heartbeat.interval.ms" => "the group config share.heartbeat.interval.ms",
        "max.poll.interval.ms" => "nothing: a record's lock (the group config share.record.lock.duration.ms) bounds its handling",
        "partition.assignment.strategy" => "nothing: the broker assigns share groups' partitions",
        "group.remote.assignor" => "nothing: the broker assigns share groups' partitions",
        "group.protocol" => "nothing: a share group has its own protocol",
        "group.instance.id" => "nothing: share groups have no static members",
        "enable.partition.eof" => "nothing: a share consumer reads no partition to its end",
        "queued.min.messages" => "max.poll.records",
        "queued.max.messages.kbytes" => "max.poll.records",
        "fetch.queue.backoff.ms" => "nothing",
        "fetch.error.backoff.ms" => "nothing",
        "consume.callback.max.messages" => "nothing",
        "message.copy.max.bytes" => "nothing",
        "topic.blacklist" => "nothing"
      }.freeze

      # :implicit (default): each_message / each_batch accept what their block
      # returned from, and release what it raised on (and the rest of the
      # batch); #poll accepts the last batch's records left unacknowledged.
      # :explicit: every record is accepted, released or rejected by the
      # application before the next poll (Errors::UnacknowledgedRecordsError).
      # @return [Symbol]
      attr_accessor :acknowledgement

      # How long (ms) commit_sync may take, and how long close waits for the
      # group to be left before it returns (the rest goes on in a thread).
      attr_accessor :max_wait_timeout

      # The longest (ms) a wait for records holds its thread without the GVL:
      # librdkafka has no wakeup for a share consumer, so #stop, #close and
      # an interrupt (Thread#raise, Timeout) take effect within it.
      attr_accessor :poll_slice

      def initialize
        super
        @acknowledgement = :implicit
        @max_wait_timeout = 10_000
        @poll_slice = 100
      end

      # @return [self]
      # @raise [Errors::ShareConsumerConfigError] a consumer-group-only setting (each named)
      # @raise [Errors::ConfigurationInvalidError] any other bad setting, or no "group.id"
      def validate!
        super
        refuse_group_only!
        unless %i[implicit explicit].include?(@acknowledgement)
          invalid!("acknowledgement must be :implicit or :explicit, got #{@acknowledgement.inspect}")
        end
        positive!(:max_wait_timeout, @max_wait_timeout)
        positive!(:poll_slice, @poll_slice)
        group = kafka_setting("group.id")
        invalid!('kafka needs "group.id": a share consumer reads as a member of a share group') if group.nil? || group.empty?
        self
      end

      # What the native share consumer gets: the kafka settings, with librdkafka's "cgrp" debug context
      # added (the one line that tells a broker without share groups, Native::ShareConsumer#unsupported).
      # @return [Array<Array(String, String)>]
      def native_pairs
        pairs = kafka_pairs.reject { |name, _| name == "debug" }
        contexts = (kafka_setting("debug") || "").split(",").map(&:strip).reject(&:empty?)
        contexts << "cgrp" unless contexts.include?("cgrp") || contexts.include?("all")
        pairs << ["debug", contexts.join(",")]
      end

      private

      def refuse_group_only!
        given = CONSUMER_GROUP_ONLY.keys.select { |name| kafka_setting(name) }
        if kafka_setting("share.acknowledgement.mode")
          raise Errors::ShareConsumerConfigError, 'set config.acknowledgement (:implicit or :explicit), not "share.acknowledgement.mode"'
        end
        return if given.empty?

        where = given.map { |name| "#{name} (a share group has #{CONSUMER_GROUP_ONLY[name]})" }
        raise Errors::ShareConsumerConfigError, "consumer-group settings a share consumer has not: #{where.join("; ")}"
      end
    end
  end
end
