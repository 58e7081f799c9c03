# frozen_string_literal: true

module Sluice
  class Consumer
    # What finished above a partition's committed offset, carried in that
    # offset's metadata, so that a member that takes the partition over (after
    # a crash, a rebalance) skips it instead of running it again. Blocks of a
    # concurrent each_message finish out of order, and the committed offset
    # stays at the lowest unfinished message (Ledger#storable!): without this,
    # everything finished above it is read again.
    #
    # The encoding, as Confluent's Parallel Consumer's: a version prefix, the
    # offset it is relative to (checked against the committed offset when
    # read: metadata left with another offset is ignored), and a bitset of
    # offsets from it (bit i: offset base + i finished), base64.
    # "sluice1:1200:BQ==" is offsets 1200 and 1202.
    # Shared by Ledger and Sluice::Testing::Consumer.
    module FinishedOffsets
      # The version prefix: other metadata (another client's, an older encoding) is ignored.
      PREFIX = "sluice1:"
      # The broker refuses a commit whose metadata is longer than its
      # offset.metadata.max.bytes (4096 by default): offsets further than this
      # above the base are left out (read again), and the metadata stays below
      # 4000 bytes (prefix, base, and the base64 of MAX_SPAN / 8 bytes).
      MAX_SPAN = 2_900 * 8

      module_function

      # @param base [Integer] the offset stored (the lowest unfinished)
      # @param offsets [Enumerable<Integer>] finished offsets above it
      # @return [String, nil] the metadata; nil when none is at most MAX_SPAN above base
      def encode(base, offsets)
        bits = 0
        offsets.each do |offset|
          relative = offset - base
          bits |= 1 << relative if relative >= 0 && relative < MAX_SPAN
        end
        return if bits.zero?

        "#{PREFIX}#{base}:#{[[bits.to_s(2).reverse].pack("b*")].pack("m0")}"
      end

      # @param metadata [String, nil] a committed offset's metadata
      # @param committed [Integer] that offset
      # @return [Array<Integer>] the finished offsets it names (none when it is
      #   not this encoding, or was written with another offset)
      def decode(metadata, committed)
        return [] unless metadata&.start_with?(PREFIX)

        base, bitset = metadata.delete_prefix(PREFIX).split(":", 2)
        return [] unless bitset && base == committed.to_s

        offsets = []
        bitset.unpack1("m0").unpack1("b*").each_char.with_index { |bit, i| offsets << (committed + i) if bit == "1" }
        offsets
      rescue ArgumentError # not base64
        []
      end
    end
  end
end
