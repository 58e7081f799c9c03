# frozen_string_literal: true

module Sluice
  class Admin
    # Settings of one admin client, filled in the block given to Admin.new and
    # frozen once valid.
    class Config < Shared::ClientConfig
      # How long (ms) one admin call may take, its round trips to the brokers included.
      attr_accessor :max_wait_timeout

      def initialize
        super
        @max_wait_timeout = 30_000
      end

      # What librdkafka gets: the properties as given, and offsets read at
      # read_uncommitted unless the application chose otherwise. librdkafka
      # asks a partition's offsets (ListOffsets: #watermark_offsets, #lag,
      # #offsets_for_time) at its isolation.level, read_committed by default
      # even on an admin's handle: the "high watermark" was the last stable
      # offset while a transaction was open, short of its messages. Kafka's
      # Admin (and kafka-consumer-groups' log-end offset) reads at
      # read_uncommitted: the offset after the partition's last message.
      # (isolation.level is a consumer property: librdkafka warns at creation
      # that a producer-type handle ignores it, but its offset queries read it.
      # The admin's creation logs are not relayed.)
      # @return [Array<Array(String, String)>]
      def kafka_pairs
        pairs = super
        pairs << ["isolation.level", "read_uncommitted"] unless kafka_setting("isolation.level")
        pairs
      end

      # Checks every setting (Admin.new calls it before freezing the config).
      # @return [self]
      # @raise [Errors::ConfigurationInvalidError] naming the first bad setting
      def validate!
        super
        positive!(:max_wait_timeout, @max_wait_timeout)
        # librdkafka takes the wait as a 32-bit int of milliseconds.
        invalid!("max_wait_timeout must be at most #{INT32_MAX} ms, got #{@max_wait_timeout.inspect}") if @max_wait_timeout > INT32_MAX
        self
      end
    end
  end
end
