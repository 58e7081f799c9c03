# frozen_string_literal: true

require_relative "mock_cluster"

module Sluice
  module Testing
    # An RSpec helper: `mock_kafka`, a MockCluster of the example's own,
    # started on first use and closed after the example. Include it in a
    # group (or `config.include Sluice::Testing::MockKafka`); override
    # `mock_kafka_brokers` (a `let`) for more than one broker. A new group's
    # first join does not wait the mock's 3 s for more members, where the
    # librdkafka's mock has the setting (`mock_kafka_group_initial_rebalance_delay_ms`).
    #
    # @example
    #   RSpec.describe OrderPublisher do
    #     include Sluice::Testing::MockKafka
    #
    #     it "publishes" do
    #       mock_kafka.create_topic("orders")
    #       producer = Sluice::Producer.new { |config| config.kafka = mock_kafka.kafka }
    #       expect(producer.produce_sync(topic: "orders", payload: "1").offset).to eq(0)
    #     ensure
    #       producer&.close
    #     end
    #   end
    module MockKafka
      # Closes the example's cluster after each example of the group.
      # @api private
      def self.included(group)
        super
        group.after { @mock_kafka&.close } if group.respond_to?(:after)
      end

      # @return [MockCluster] this example's cluster
      # @raise [MockCluster::UnavailableError] the linked librdkafka has no mock cluster
      def mock_kafka = @mock_kafka ||= MockCluster.new(brokers: mock_kafka_brokers).tap { |cluster| apply_mock_kafka_join_delay(cluster) }

      # @return [Integer] how many brokers mock_kafka starts with (1; a `let` overrides it)
      def mock_kafka_brokers = 1

      # How long a new group's first join waits for more members in mock_kafka
      # (Kafka's group.initial.rebalance.delay.ms): 0, so a spec that
      # subscribes reads at once; a `let` overrides it, nil keeps the mock's
      # 3000. Set only where the librdkafka's mock has the setting (not 2.0.2).
      # @return [Integer, nil] ms
      def mock_kafka_group_initial_rebalance_delay_ms = 0

      private

      def apply_mock_kafka_join_delay(cluster)
        delay = mock_kafka_group_initial_rebalance_delay_ms
        cluster.group_initial_rebalance_delay_ms = delay if delay && MockCluster.initial_rebalance_delay?
      end
    end
  end
end
