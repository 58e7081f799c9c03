# frozen_string_literal: true

require "securerandom"
require "sluice/testing"

# The same scenario against the broker and against Clients::Buffered: what
# the application observes (reports, events, errors, a transaction's abort)
# must be the same, or specs written against the double would lie.
RSpec.describe "Clients::Buffered's parity with the real client", :kafka, timeout: 120 do
  # Fresh topics: the real reports' offsets start at 0, as the double's.
  names = { topic: "sluice-spec-parity-#{SecureRandom.hex(4)}" }
  names[:txn_topic] = "#{names[:topic]}-txn"
  names.each { |name, value| define_method(name) { value } }

  before(:all) do
    admin = Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": TestKafka::BROKERS } }
    admin.create_topic(names[:topic], partitions: 3)
    admin.create_topic(names[:txn_topic], partitions: 1)
    admin.close
  end

  let(:watched) do
    %w[message.produced_sync message.produced_async messages.produced_sync message.acknowledged
       transaction.started transaction.committed transaction.aborted]
  end

  # Builds a producer for the run: real, or on the in-memory client with the topic's partition count.
  def producer_for(client, kafka: {})
    client_class = client == :buffered ? Sluice::Clients::Buffered : Sluice::Native::Producer
    producer = build_producer(kafka: kafka, client_class: client_class)
    producer.client.partition_counts[topic] = 3 if client == :buffered
    producer
  end

  def invalid_inputs
    [{ topic: topic, payload: 42 }, { topic: "no spaces", payload: "x" }, { topic: topic, payload: "x", partition: -2 },
     { topic: topic, payload: "x", headers: { "h" => 1 } }, { topic: topic, payload: "x", timestamp: 0 }]
  end

  def produce_scenario(client)
    producer = producer_for(client)
    events = record_events(producer.monitor, *watched)
    reports = %w[k0 k1 k2 k3 k4 k5].map { |key| producer.produce_sync(topic: topic, key: key, payload: key) }
    reports << producer.produce_async(topic: topic, partition: 2, payload: "p2").wait
    reports.concat(producer.produce_many_sync([{ topic: topic, partition: 1, payload: "m1" }, { topic: topic, key: "k9", payload: "m2" }]))
    errors = invalid_inputs.map do |message|
      producer.produce_sync(message)
    rescue Sluice::Errors::BaseError => e
      [e.class, e.message]
    end
    producer.flush
    { reports: reports.map { |r| [r.topic, r.partition, r.offset, r.error] }, errors: errors, events: events.events.map(&:id).tally }
  end

  def transaction_scenario(client)
    producer = producer_for(client, kafka: { "transactional.id": "sluice-parity-#{client}-#{SecureRandom.hex(4)}" })
    events = record_events(producer.monitor, *watched.grep(/transaction/))
    producer.transaction { producer.produce_async(topic: txn_topic, payload: "t1") }
    producer.transaction do
      producer.produce_async(topic: txn_topic, payload: "t2")
      raise Sluice::AbortTransaction
    end
    producer.transaction { producer.produce_async(topic: txn_topic, payload: "t3") }
    kept = client == :buffered ? producer.client.messages : consume(txn_topic, 0, 0, 2, isolation: "read_committed")
    { kept: kept.map { |m| m[:payload] }, events: events.events.map(&:id) }
  end

  it "observes the same reports, events and errors" do
    real = produce_scenario(:real)
    buffered = produce_scenario(:buffered)

    expect(buffered[:reports]).to eq(real[:reports])
    expect(buffered[:errors]).to eq(real[:errors])
    expect(buffered[:events]).to eq(real[:events])
    expect(real[:errors].size).to eq(invalid_inputs.size) # every input was refused
  end

  it "keeps what a transaction committed and drops what one aborted, as the broker shows a read_committed reader" do
    real = transaction_scenario(:real)
    buffered = transaction_scenario(:buffered)

    expect(real[:kept]).to eq(%w[t1 t3])
    expect(buffered).to eq(real)
  end
end
