# frozen_string_literal: true

module Sluice
  class Consumer
    # What this member processed on partitions it gave up without the commit
    # a revocation needed (refused: its session ended, the coordinator moved),
    # so that, given one of them back, it does not read it again from the
    # group's last commit: from the partition's start (auto.offset.reset:
    # earliest) when nothing was ever committed, or from its end (latest),
    # skipping what came meanwhile (issue 55).
    #
    # A partition given back starts at max(the group's committed offset, the
    # offset left behind): assigned at the offset left behind, so the assign
    # answer waits for nothing, then the group's committed offset is fetched
    # and wins when another member committed further since (a seek there,
    # before anything of the partition was handed out); otherwise the offset
    # left behind is committed under the new generation.
    #
    # Only the consumer's own commits (enable.auto.commit: what it stored)
    # are remembered: offsets sent in a transaction never are, an aborted
    # transaction's messages must be read again.
    class LeftBehind
      # @param client [Native::Consumer]
      # @param instrument [#call] (event name, payload)
      # @param timeout_ms [Integer] the committed-offset fetch's and the seek's wait
      def initialize(client:, instrument:, timeout_ms:)
        @client = client
        @instrument = instrument
        @timeout_ms = timeout_ms
        @offsets = {} # [topic, partition] => the offset after what was processed
      end

      # @param offsets [Array<Array(String, Integer, Integer)>] [[topic, partition, offset], ...] not committed
      # @return [void]
      def remember(offsets)
        offsets.each do |topic, partition, offset|
          key = [topic, partition]
          @offsets[key] = offset if offset >= @offsets.fetch(key, -1)
        end
      end

      # A revocation's commit failed: reports what it leaves behind on the
      # revoked partitions (consumer.offsets_left_behind), and keeps it.
      # @param revoked [Array<Array(String, Integer)>]
      # @param offsets [Array, nil] the failed commit's [[topic, partition, offset], ...]; nil when it
      #   did not answer in time (every revoked partition is reported, its offset not known: it may still land)
      # @param stored [Array<Array(String, Integer, Integer)>] what was stored on them, kept when offsets is nil
      # @param error [KafkaError] why the commit failed
      # @return [void]
      def commit_failed(revoked, offsets, stored, error)
        left = if offsets
                 attempted = offsets.to_h { |topic, partition, offset| [[topic, partition], offset] }
                 revoked.filter_map { |pair| (offset = attempted[pair]) && offset >= 0 && [pair, offset] }.to_h
               else
                 revoked.to_h { |pair| [pair, nil] }
               end
        remember(offsets ? left.map { |pair, offset| [*pair, offset] } : stored)
        @instrument.call("consumer.offsets_left_behind", partitions: by_topic(left), error: error, lost: false) unless left.empty?
      end

      # A lost assignment is revoked without a commit (the group went on
      # without this member): what was stored since the last one is left
      # behind, reported (nil where nothing was stored) and kept.
      # @param revoked [Array<Array(String, Integer)>]
      # @param stored [Array<Array(String, Integer, Integer)>]
      # @return [void]
      def lost(revoked, stored)
        remember(stored)
        known = stored.to_h { |topic, partition, offset| [[topic, partition], offset] }
        @instrument.call("consumer.offsets_left_behind", partitions: by_topic(revoked.to_h { |pair| [pair, known[pair]] }), error: nil, lost: true)
      end

      # The assignment to answer, each remembered partition at its offset
      # left behind (then forgotten: #recover deals with it).
      # @param pairs [Array<Array(String, Integer)>]
      # @return [Array(Array, Hash)] the assignment, and { [topic, partition] => offset } of those remembered
      def starts(pairs)
        remembered = pairs.filter_map { |pair| (offset = @offsets.delete(pair)) && [pair, offset] }.to_h
        [pairs.map { |pair| remembered.key?(pair) ? [*pair, remembered[pair]] : pair }, remembered]
      end

      # After the assign: where the group committed further, there (another
      # member went on); elsewhere the offset left behind is committed.
      # A failed fetch keeps the offsets left behind, uncommitted (at least
      # once: what another member committed meanwhile is read again).
      # @param remembered [Hash{Array(String, Integer) => Integer}] #starts' second value
      # @return [void]
      def recover(remembered)
        return if remembered.empty?

        committed, error = group_offsets(remembered.keys)
        positions = remembered.to_h { |pair, offset| [pair, [offset, committed.fetch(pair, -1)].max] }
        ahead = positions.select { |pair, offset| offset > remembered[pair] }
        seek(ahead) unless ahead.empty?
        commit(positions.reject { |pair, _| ahead.key?(pair) }) unless error
        @instrument.call("consumer.offsets_recovered", partitions: by_topic(positions), committed: by_topic(committed), error: error)
      end

      private

      # @return [Array(Hash, KafkaError or nil)] { [topic, partition] => offset } of those committed
      def group_offsets(pairs)
        code, offsets = Shared::Blocking.call { @client.committed(pairs, @timeout_ms) }
        return [{}, KafkaError.new(code)] unless code.zero?

        [offsets.filter_map { |topic, partition, offset, err| [[topic, partition], offset] if err.zero? && offset >= 0 }.to_h, nil]
      end

      def seek(positions)
        error, = Shared::Blocking.call { @client.seek(positions.map { |pair, offset| [*pair, offset] }, @timeout_ms) }
        @instrument.call("error.occurred", type: "consumer.seek_error", error: KafkaError.from_tuple(error)) if error
      end

      # Stored too: a commit of the stored offsets before anything is processed carries it.
      def commit(positions)
        return if positions.empty?

        list = positions.map { |pair, offset| [*pair, offset] }
        @client.store_positions(list.map { |entry| [*entry, nil] })
        code = @client.commit(list, true)
        @instrument.call("error.occurred", type: "consumer.commit_error", error: KafkaError.new(code)) if code
      end

      def by_topic(positions)
        positions.group_by { |(topic, _), _| topic }.transform_values { |list| list.to_h { |(_, partition), offset| [partition, offset] } }
      end
    end
  end
end
