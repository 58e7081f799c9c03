# frozen_string_literal: true

require_relative "../sluice"

module Sluice
  # Application specs without a broker (`require "sluice/testing"`):
  #
  #   producer = Sluice::Testing.producer               # its client keeps what it produces
  #   consumer = Sluice::Testing::Consumer.new          # reads what a spec feeds it
  #   consumer.feed(topic: "orders", payload: "42")
  #   Sluice::Testing::MockCluster.start { |cluster| ... } # librdkafka's mock brokers, for real clients
  #
  # Under RSpec the matchers (have_produced) are loaded too.
  module Testing
    # A producer whose client is Clients::Buffered: no broker is contacted,
    # every message is kept (`producer.client.messages`). Everything else is
    # a real producer's: close it as one.
    # @param partitions [Hash{String => Integer}] partitions per topic, for key partitioning
    # @yieldparam config [Producer::Config] (client_class may be set to Clients::Dummy)
    # @return [Producer]
    def self.producer(partitions: {})
      producer = Producer.new do |config|
        config.client_class = Clients::Buffered
        yield config if block_given?
      end
      partitions.each { |topic, count| producer.client.partition_counts[topic.to_s] = count }
      producer
    end
  end
end

require_relative "testing/consumer"
require_relative "testing/mock_kafka"
require_relative "testing/rspec" if defined?(RSpec) && !defined?(Sluice::Testing::Matchers)
