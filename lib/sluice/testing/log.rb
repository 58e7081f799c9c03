# frozen_string_literal: true

module Sluice
  module Testing
    # The in-memory partitions a Testing::Consumer reads: the messages fed to
    # each topic-partition, offsets counted from 0, and the order they were
    # fed in (messages of several partitions are handed out in that order).
    class Log
      def initialize
        @partitions = Hash.new { |hash, key| hash[key] = [] } # [topic, partition] => [[seq, Message], ...]
        @seq = 0
      end

      # @param fields [Array] key, payload, timestamp_ms, raw_headers (Message's fields after the offset)
      # @return [Message] the message, at the partition's next offset
      def append(topic, partition, fields)
        entries = @partitions[[topic, partition]]
        message = Message.new(topic, partition, entries.size, *fields)
        entries << [@seq += 1, message]
        message
      end

      # The partitions fed so far, as [topic, partition].
      def partitions = @partitions.keys

      # Of the partitions given with their positions, the message fed first
      # among those at each position, or nil.
      # @param positions [Hash{Array(String, Integer) => Integer}]
      def next_of(positions)
        entries = positions.filter_map { |partition, offset| @partitions.fetch(partition, nil)&.at(offset) }
        entries.min_by(&:first)&.last
      end

      # Offset after the last message of a partition.
      def end_offset(topic, partition) = @partitions.fetch([topic, partition], []).size
    end
  end
end
