# frozen_string_literal: true

module Sluice
  module Shared
    # A new topic's partition, or one whose leader just moved, has no leader
    # its client knows for a moment: a query that needs the leader (watermark
    # offsets) asks again within the caller's wait instead of failing on the
    # first answer (2 of 140 rounds right after create_topic did).
    module LeaderWait
      # A moved or new partition's leader.
      LEADER_PENDING = %i[not_leader_for_partition leader_not_available].freeze
      # ...and a topic whose creation this client has not seen yet (a consumer's:
      # Admin#create_topic returns once its metadata shows the topic).
      PENDING = (LEADER_PENDING + %i[unknown_topic_or_part]).freeze
      # A group's coordinator that moved, or is still loading the group's
      # offsets (a broker just started: Kafka 4.0.1 answered a consumer's
      # first committed-offsets call with not_coordinator).
      COORDINATOR_PENDING = %i[not_coordinator coordinator_not_available coordinator_load_in_progress].freeze
      RETRY = 0.1 # s between two asks

      module_function

      # Yields until the block's result (an Array whose first element is an
      # error code, 0 for none) names none of pending, or the deadline (a
      # Shared::Clock.now value) passed. @return [Array] the block's last result
      def retrying(deadline, pending: PENDING)
        loop do
          result = yield
          code = result.first
          return result if code.zero? || !pending.include?(KafkaError.code_for(code)) || Shared::Clock.now >= deadline

          sleep(RETRY)
        end
      end
    end
  end
end
