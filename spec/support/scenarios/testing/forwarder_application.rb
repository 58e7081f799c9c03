# frozen_string_literal: true

# An application's spec using Sluice::Testing, for spec/sluice/testing/no_broker_spec.rb, which copies it
# beside nothing else as forwarder_spec.rb and runs it with rspec, as a user's: it must pass without
# connecting to BROKERS (a port the spec listens on).
require "sluice/testing"

# What the application would have in lib/: a consumer that forwards orders.
class Forwarder
  def initialize(consumer, producer)
    @consumer = consumer
    @producer = producer
  end

  def run
    @consumer.subscribe("orders")
    @consumer.each_message do |message|
      raise "flaky" if message.payload == "retry-me" && (@failed = !@failed)

      @producer.produce_sync(topic: "shipments", key: message.key, payload: message.payload.upcase)
    end
  end
end

RSpec.describe Forwarder do
  let(:producer) do
    Sluice::Testing.producer(partitions: { "shipments" => 4 }) { |config| config.kafka = { "bootstrap.servers": ENV.fetch("BROKERS") } }
  end
  let(:consumer) { Sluice::Testing::Consumer.new }

  after { producer.close && consumer.close }

  it "forwards every order, again after a failure" do
    consumer.feed(topic: "orders", key: "a", payload: "first")
    consumer.feed(topic: "orders", key: "b", payload: "retry-me")
    forwarder = Forwarder.new(consumer, producer)

    expect { forwarder.run }.to raise_error("flaky")
    forwarder.run

    expect(producer).to have_produced(topic: "shipments", payload: "FIRST").once
    expect(producer).to have_produced(topic: "shipments", key: "b", payload: "RETRY-ME").once
    consumer.commit
    expect(consumer.committed).to eq("orders" => { 0 => 2 })
  end
end
