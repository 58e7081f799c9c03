# frozen_string_literal: true

module Sluice
  class Consumer
    # Answers the rebalances librdkafka hands the consumer as events on its
    # queue (no librdkafka -> Ruby callback): assigns what the group
    # coordinator gave, and before partitions are given up commits their
    # stored offsets, so their next owner starts after what was processed
    # here (a commit that fails leaves them behind: Consumer reports it as
    # consumer.offsets_left_behind; given back, such a partition resumes
    # after them: LeftBehind). Both the eager and the cooperative-sticky
    # protocols: cooperative rebalances assign and revoke increments.
    #
    # Each event is answered once: the Inbox keeps one whose answer a stop
    # (Fiber#raise) cut short and hands it here again; one answered already
    # (the partitions list is the event's own Array) gets its first result.
    class Rebalancer
      # @param commit [#call] (ms or nil, revoked pairs): commits before a revoke
      # @param lost [#call, nil] (revoked pairs): a lost assignment, which
      #   cannot commit (the group went on without this member)
      # @param left_behind [LeftBehind, nil] where partitions given back start
      def initialize(client:, commit:, instrument:, lost: nil, left_behind: nil)
        @client = client
        @commit = commit
        @lost = lost
        @left_behind = left_behind
        @instrument = instrument
      end

      # @param kind [Symbol] :assign, :revoke or :error (librdkafka could not rebalance)
      # @param partitions [Array] [[topic, partition, offset, err], ...]
      # @param commit_within [Integer, nil] ms the commit before a revoke may
      #   take (a closing consumer's remaining time; nil: the usual wait)
      # @return [Array<Array(String, Integer)>] the partitions given up
      def call(kind, partitions, protocol, code, commit_within: nil)
        return @given_up if @answered.equal?(partitions)

        @event = partitions
        pairs = partitions.map { |topic, partition| [topic, partition] }
        incremental = protocol == "COOPERATIVE"
        case kind
        when :assign then assign(pairs, incremental)
        when :revoke then revoke(pairs, incremental, commit_within)
        else fail_safe(code)
        end
      rescue Exception # rubocop:disable Lint/RescueException -- librdkafka must never be left waiting for the answer
        unless @answered.equal?(partitions)
          @client.unassign(nil, false)
          answered!(nil, "unassign", kind == :assign ? [] : pairs.to_a)
        end
        raise
      end

      private

      def assign(pairs, incremental)
        return answer_assign(pairs, incremental) unless @left_behind

        assignment, remembered = @left_behind.starts(pairs)
        answer_assign(assignment, incremental).tap { @left_behind.recover(remembered) }
      end

      def answer_assign(pairs, incremental)
        answered!(@client.assign(pairs, incremental), "assign", [])
        @instrument.call("consumer.partitions_assigned", partitions: by_topic(pairs))
        []
      end

      # A lost assignment (the group went on without us) cannot commit: the
      # coordinator refuses a member it no longer knows.
      def revoke(pairs, incremental, commit_within)
        @client.assignment_lost? ? @lost&.call(pairs) : @commit.call(commit_within, pairs)
        answered!(@client.unassign(pairs, incremental), "unassign", pairs)
        @instrument.call("consumer.partitions_revoked", partitions: by_topic(pairs))
        pairs
      end

      # librdkafka's advice for any other rebalance error: drop the whole
      # assignment to resynchronise.
      def fail_safe(code)
        pairs = @client.assignment.map { |topic, partition| [topic, partition] }
        answered!(@client.unassign(nil, false), "unassign", pairs)
        @instrument.call("error.occurred", type: "consumer.rebalance_error", error: KafkaError.new(code))
        @instrument.call("consumer.partitions_revoked", partitions: by_topic(pairs)) unless pairs.empty?
        pairs
      end

      # A group that terminated meanwhile (a closing consumer's) answers
      # :destroy (librdkafka patch 0003): nothing is left to assign, nothing to report.
      # given_up: what the event gives up, its result when handed here again.
      def answered!(error, action, given_up)
        @answered = @event
        @given_up = given_up
        return unless error && KafkaError.code_for(error.first) != :destroy

        @instrument.call("error.occurred", type: "consumer.rebalance_error",
                                           error: Errors::ConsumerError.new(action, KafkaError.from_tuple(error)))
      end

      def by_topic(pairs) = pairs.group_by(&:first).transform_values { |list| list.map { |entry| entry[1] }.sort }
    end
  end
end
