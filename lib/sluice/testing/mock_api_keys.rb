# frozen_string_literal: true

module Sluice
  module Testing
    # Reopened for its table of requests (mock_cluster.rb documents the class).
    class MockCluster
      # Kafka's protocol ApiKeys of the requests librdkafka's mock cluster
      # answers, by name. Kafka's numbering is fixed by the protocol and
      # librdkafka keeps it in a private header, hence the list here. Errors
      # injected for another request would never be answered.
      API_KEYS = {
        produce: 0, fetch: 1, list_offsets: 2, metadata: 3, offset_commit: 8, offset_fetch: 9,
        find_coordinator: 10, join_group: 11, heartbeat: 12, leave_group: 13, sync_group: 14,
        api_versions: 18, init_producer_id: 22, offset_for_leader_epoch: 23, add_partitions_to_txn: 24,
        add_offsets_to_txn: 25, end_txn: 26, txn_offset_commit: 28, consumer_group_heartbeat: 68
      }.freeze

      # @param api [Symbol] a key of API_KEYS
      # @return [Integer] its ApiKey
      # @raise [ArgumentError] a request the mock does not answer
      def self.api_key(api)
        API_KEYS.fetch(api) do
          raise ArgumentError, "the mock cluster answers no #{api.inspect} request; it answers #{API_KEYS.keys.join(", ")}"
        end
      end
    end
  end
end
