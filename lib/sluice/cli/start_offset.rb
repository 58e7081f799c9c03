# frozen_string_literal: true

module Sluice
  module CLI
    # kcat's -o: where tail starts in each partition. beginning, end, stored
    # (the group's committed offset), an absolute offset, -N (N before the
    # end) or s@TIME (the first message at or after TIME).
    class StartOffset
      # librdkafka's logical offsets (RD_KAFKA_OFFSET_*)
      BEGINNING = -2
      # (see BEGINNING)
      END_OF_PARTITION = -1
      # (see BEGINNING)
      STORED = -1000
      TAIL_BASE = -2000 # RD_KAFKA_OFFSET_TAIL(n) is TAIL_BASE - n

      # #kind: :beginning, :end, :stored, :tail, :offset or :time; #value: N for
      # :tail, the offset for :offset, the Time for :time, else nil.
      attr_reader :kind, :value

      # @raise [UsageError]
      def self.parse(text)
        case text
        when "beginning" then new(:beginning)
        when "end" then new(:end)
        when "stored" then new(:stored)
        when /\A-(\d+)\z/ then new(:tail, bounded(Integer(Regexp.last_match(1), 10), MAX_TAIL, text))
        when /\A\d+\z/ then new(:offset, bounded(Integer(text, 10), MAX_OFFSET, text))
        when /\As@(.+)\z/ then new(:time, TimeArgument.parse(Regexp.last_match(1), "-o s@"))
        else raise UsageError, "-o takes beginning, end, stored, an offset, -N (N before the end) or s@TIME, got #{text.inspect}"
        end
      end

      # Kafka's largest offset (int64).
      MAX_OFFSET = (2**63) - 1
      # The largest N of -N: librdkafka's RD_KAFKA_OFFSET_TAIL(N) must stay an int64.
      MAX_TAIL = (2**63) + TAIL_BASE

      # @raise [UsageError] number is past max
      def self.bounded(number, max, text)
        raise UsageError, "-o #{text}: past Kafka's largest offset (#{max})" if number > max

        number
      end

      def initialize(kind, value = nil)
        @kind = kind
        @value = value
      end

      # What librdkafka starts a group's new member at (auto.offset.reset),
      # where -o has a meaning for a subscription: nil when it has none.
      def auto_offset_reset = { beginning: "earliest", end: "latest", stored: "latest" }[@kind]

      # { partition => offset } for Consumer#assign: librdkafka resolves the
      # logical ones itself; a time needs the admin's lookup
      # (offsets_for_time), where -1 means "after the last message": the end.
      def offsets(partitions, admin, topic)
        return times(partitions, admin, topic) if @kind == :time

        partitions.to_h { |partition| [partition, logical] }
      end

      private

      def logical
        case @kind
        when :beginning then BEGINNING
        when :end then END_OF_PARTITION
        when :stored then STORED
        when :tail then TAIL_BASE - @value
        else @value
        end
      end

      def times(partitions, admin, topic)
        found = admin.offsets_for_time(topic, @value)
        partitions.to_h { |partition| [partition, found.fetch(partition, -1).negative? ? END_OF_PARTITION : found[partition]] }
      end
    end
  end
end
