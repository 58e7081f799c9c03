# frozen_string_literal: true

module Sluice
  class Admin
    # Consumer groups: what they are, what they committed, how far behind they
    # are, and moving their offsets. Of a share group (KIP-932) librdkafka
    # reaches only its deletion (DeleteGroups): it lists none, describes one as
    # it does a group that does not exist, and has no request for its start
    # offsets (docs/SHARE_GROUPS.md, "Admin").
    module Groups
      # librdkafka's state names -> Symbols
      STATES = { "Unknown" => :unknown, "PreparingRebalance" => :preparing_rebalance, "CompletingRebalance" => :completing_rebalance,
                 "Stable" => :stable, "Dead" => :dead, "Empty" => :empty }.freeze
      # librdkafka's group types (2.10 and later: KIP-848's consumer protocol or the classic one) -> Symbols
      TYPES = { "Consumer" => :consumer, "Classic" => :classic, "Unknown" => :unknown }.freeze
      # A group with no member: its offsets may be moved (Dead: it has none yet).
      IDLE = %i[empty dead].freeze
      # Why reset_offsets refused a share group's id (NotConsumerGroupError's message).
      NOT_CONSUMER_GROUP = "%s is a share group (or another kind that commits no offsets): " \
                           "librdkafka cannot move a share group's start offsets (kafka-share-groups.sh --reset-offsets can)"

      # The consumer groups' ids, sorted (share groups are not among them:
      # librdkafka leaves out every group whose protocol is not a consumer's).
      # @raise [Errors::AdminError] a broker did not answer: an incomplete
      #   listing is never returned as if it were all the groups
      # @return [Array<String>]
      def groups
        CoordinatorRetry.call(@config.max_wait_timeout) do |timeout_ms|
          listings, errors = request(:groups, nil, timeout_ms) { |client, id, ms| client.list_groups(id, ms) }
          errors.each { |code, message| fail!(:groups, "(a broker did not answer: the listing is incomplete)", code, message) }
          listings.map(&:first).sort
        end
      end

      # A group's state and members.
      # @param group [String] the group id
      # @return [Hash] { state:, type:, protocol:, members: [{ member_id:, client_id:, host:, group_instance_id:,
      #   assignment: { topic => [partition, ...] }, target_assignment: }] }
      #   state: :stable, :empty, :preparing_rebalance, :completing_rebalance, :dead or :unknown (KIP-848's
      #   assigning and reconciling among them); type: the group protocol, :classic or :consumer (KIP-848), nil
      #   with a librdkafka before 2.10; protocol: a classic group's assignor ("range", "cooperative-sticky", ...);
      #   target_assignment: under KIP-848, the partitions the broker is moving the member to, like assignment
      #   (nil for a classic group)
      # @raise [ArgumentError] group is not an id Kafka can carry (empty, invalid text, a NUL byte, over 32,767 bytes)
      # @raise [Errors::UnknownGroupError] no such consumer group; a share group too, which librdkafka
      #   cannot describe (its answer for one is that for no group: its message says so)
      def describe_group(group)
        group = group_id(group)
        description = group_description(group)
        return description unless description[:state] == :dead

        fail!(:describe_group, group, KafkaError.number_for(:group_id_not_found),
              "no consumer group #{group} (or a share group: librdkafka describes none)")
      end

      # What the group committed: the offset of the next message each partition would read.
      # @param group [String] the group id
      # @return [Hash] { topic => { partition => offset } } (empty for an unknown group, and for a share
      #   group: it commits none, and its start offsets have no librdkafka request)
      # @raise [ArgumentError] group is not an id Kafka can carry (empty, invalid text, a NUL byte, over 32,767 bytes)
      def committed_offsets(group)
        group = group_id(group)
        partitions = group_partitions(:committed_offsets, group) { |client, id, ms| client.list_group_offsets(id, ms, group) }
        partitions.each_with_object({}) do |(topic, partition, offset), out|
          (out[topic] ||= {})[partition] = offset unless offset.negative?
        end
      end

      # How far the group is behind: { topic => { partition => high watermark - committed } }
      # @param group [String] the group id
      # @return [Hash{String => Hash{Integer => Integer}}] partitions the group committed for
      # @raise [ArgumentError] group is not an id Kafka can carry (empty, invalid text, a NUL byte, over 32,767 bytes)
      # @example
      #   admin.lag("billing") # => { "orders" => { 0 => 12, 1 => 0 } }
      def lag(group)
        committed_offsets(group).to_h do |topic, offsets|
          [topic, offsets.to_h { |partition, offset| [partition, watermark_offsets(topic, partition).last - offset] }]
        end
      end

      # Moves the group's committed offsets on a topic: to :earliest, :latest,
      # the first message at or after a Time, or { partition => offset }.
      # @return [Hash] { partition => offset } as committed
      # @raise [Errors::GroupNotEmptyError] while the group has members
      # @raise [Errors::NotConsumerGroupError] the id is a share group's (whose start offsets librdkafka cannot move)
      # @param group [String] the group id
      # @param topic [String, Symbol]
      # @param target [Symbol, Time, Hash{Integer => Integer}] :earliest, :latest, a Time, or { partition => offset }
      # @raise [ArgumentError] a group id Kafka cannot carry; target is none of those; a partition or offset out of Kafka's range
      #   (an offset is an Integer from 0 to 2**63-1); a Time before 1970-01-01 00:00:00 UTC or past 2**63-1 ms after it
      def reset_offsets(group, topic, target)
        group = group_id(group)
        topic = topic_name(topic)
        offsets = target_offsets(topic, target)
        idle!(group)
        commit_offsets(group, offsets.map { |partition, offset| [topic, partition, offset] })
        offsets
      end

      # Deletes a group and what it committed: a consumer group, or a share group
      # (Kafka 4: its start offsets go with it; its group configs stay).
      # @param group [String] the group id
      # @return [nil]
      # @raise [ArgumentError] group is not an id Kafka can carry (empty, invalid text, a NUL byte, over 32,767 bytes)
      # @raise [Errors::UnknownGroupError, Errors::GroupNotEmptyError]
      def delete_group(group)
        group = group_id(group)
        group_items(:delete_group, group) { |client, id, ms| client.delete_group(id, ms, group) }
        nil
      end

      private

      def group_description(group)
        _, _, _, state, protocol, members, type = group_items(:describe_group, group) { |client, id, ms| client.describe_group(id, ms, group) }.first
        { state: STATES.fetch(state, :unknown), type: type && TYPES.fetch(type, :unknown), protocol: protocol,
          members: members.map { |member| member_info(member) } }
      end

      def member_info((member_id, client_id, host, assignment, group_instance_id, target))
        { member_id: member_id, client_id: client_id, host: host, group_instance_id: group_instance_id,
          assignment: partitions_by_topic(assignment), target_assignment: target && partitions_by_topic(target) }
      end

      # [[topic, partition, ...], ...] -> { topic => [partition, ...] }
      def partitions_by_topic(list) = list.group_by(&:first).transform_values { |entries| entries.map { |entry| entry[1] } }

      # A request to the group's coordinator, its items checked; made again
      # while the coordinator moves or loads the group (CoordinatorRetry).
      def group_items(action, group, &block)
        CoordinatorRetry.call(@config.max_wait_timeout) { |ms| check_items!(action, group, request(action, group, ms, &block)) }
      end

      # The partitions of a group result, each checked (inside the retry: a
      # partition's error may be the coordinator's too).
      def group_partitions(action, group, &block)
        CoordinatorRetry.call(@config.max_wait_timeout) do |ms|
          check_items!(action, group, request(action, group, ms, &block)).flat_map(&:last).each do |topic, partition, _, code|
            fail!(action, "#{group} #{topic}/#{partition}", code, nil) unless code.zero?
          end
        end
      end

      # A commit to a group id that no group has makes a group; refused as for no
      # group, the id is a group's of another kind (share, streams).
      def commit_offsets(group, payload)
        group_partitions(:reset_offsets, group) { |client, id, ms| client.alter_group_offsets(id, ms, group, payload) }
      rescue Errors::UnknownGroupError => e
        raise Errors::NotConsumerGroupError.new("reset_offsets #{group}", KafkaError.new(e.kafka_error.number, NOT_CONSUMER_GROUP % group))
      end

      def idle!(group)
        state = group_description(group)[:state]
        return if IDLE.include?(state)

        fail!(:reset_offsets, group, KafkaError.number_for(:non_empty_group), "group #{group} is #{state}: stop its consumers first")
      end

      def target_offsets(topic, target)
        case target
        when :earliest then partitions_of(topic).to_h { |partition| [partition, watermark_offsets(topic, partition).first] }
        when :latest then partitions_of(topic).to_h { |partition| [partition, watermark_offsets(topic, partition).last] }
        when Time then offsets_for_time(topic, target).to_h { |partition, offset| [partition, offset_or_end(topic, partition, offset)] }
        when Hash then explicit_offsets(target)
        else raise ArgumentError, "reset_offsets takes :earliest, :latest, a Time or { partition => offset }, got #{target.inspect}"
        end
      end

      # No message at or after the time: the partition's end, where the next one will be.
      def offset_or_end(topic, partition, offset) = offset.negative? ? watermark_offsets(topic, partition).last : offset

      def explicit_offsets(offsets)
        raise ArgumentError, "reset_offsets needs at least one partition" if offsets.empty?

        offsets.each do |partition, offset|
          partition!(partition)
          offset!(partition, offset)
        end
      end

      # Kafka's offsets are 64-bit. A negative one is no position (librdkafka
      # gives -1 and -2 the meaning "end" and "beginning"): :latest and :earliest ask for those.
      def offset!(partition, offset)
        return if offset.is_a?(Integer) && offset.between?(0, INT64_MAX)

        raise ArgumentError, "the offset for partition #{partition} must be an Integer from 0 to #{INT64_MAX}, got #{offset.inspect}"
      end

      def partitions_of(topic) = describe_topic(topic)[:partitions].map { |partition| partition[:partition] }

      # Any text Kafka can carry (a protocol string: at most 32,767 bytes), in
      # a valid encoding, and without a NUL byte (librdkafka takes a C string).
      def group_id(group)
        text = group.encode(Encoding::UTF_8) if group.is_a?(String) && group.valid_encoding?
        return text if text && !text.empty? && text.bytesize <= 32_767 && !text.include?("\0")

        raise ArgumentError, "a group id is a non-empty String of valid text without NUL bytes, at most 32,767 bytes, " \
                             "got #{group.inspect[0, 200]}"
      rescue EncodingError
        raise ArgumentError, "a group id must be convertible to UTF-8, got #{group.inspect[0, 200]}"
      end
    end
  end
end
