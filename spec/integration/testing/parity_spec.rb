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
  names[:consumed_topic] = "#{names[:topic]}-consumed"
  names.each { |name, value| define_method(name) { value } }

  before(:all) do
    admin = Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": TestKafka::BROKERS } }
    admin.create_topic(names[:topic], partitions: 3)
    admin.create_topic(names[:txn_topic], partitions: 1)
    admin.create_topic(names[:consumed_topic], partitions: 1)
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

  # The two messages the consumer of #consumed_scenario reads: a real
  # consumer reads them from the broker, the double is fed them.
  def consumer_for(client)
    if client == :buffered
      consumer = Sluice::Testing::Consumer.new
      %w[c1 c2].each { |payload| consumer.feed(topic: consumed_topic, payload: payload) }
      consumer.assign(consumed_topic => [0])
      return [consumer, [consumer.poll, consumer.poll]]
    end

    consumer = build_consumer("enable.auto.commit": false)
    consumer.assign(consumed_topic => { 0 => 0 })
    [consumer, read_messages(consumer, 2, 20).map { |m| Sluice::Message.new(m[:topic], m[:partition], m[:offset]) }]
  end

  # Issue 58: the double's consumer kept -1001 after a transaction that
  # marked its messages as consumed committed.
  def consumed_scenario(client)
    producer = producer_for(client, kafka: { "transactional.id": "sluice-parity-consumed-#{client}-#{SecureRandom.hex(4)}" })
    consumer, (first, second) = consumer_for(client)
    before = consumer.committed
    producer.transaction { producer.transaction_mark_as_consumed(consumer, first) }
    committed = consumer.committed
    producer.transaction do
      producer.transaction_mark_as_consumed(consumer, second)
      raise Sluice::AbortTransaction
    end
    { before: before, committed: committed, after_abort: consumer.committed }
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

  it "commits a consumer's offsets with the transaction that marked them consumed, and not with one that aborted" do
    build_producer.tap { |p| p.produce_many_sync([{ topic: consumed_topic, payload: "c1" }, { topic: consumed_topic, payload: "c2" }]) }
    real = consumed_scenario(:real)
    buffered = consumed_scenario(:buffered)

    expect(real).to eq(before: { consumed_topic => { 0 => -1001 } }, committed: { consumed_topic => { 0 => 1 } },
                       after_abort: { consumed_topic => { 0 => 1 } })
    expect(buffered).to eq(real)
  end

  # Issue 42: the double took a 2 MB payload, a partition past the topic's
  # count and a variant setting that is not topic-level, where the real
  # producer refuses each. Same mistakes, same error class and code.
  def mistakes(client)
    producer = producer_for(client)
    {
      "a payload over message.max.bytes" => -> { producer.produce_sync(topic: topic, payload: "x" * 2_000_000) },
      "a key and payload over a lowered message.max.bytes" => lambda {
        small = producer_for(client, kafka: { "message.max.bytes": 2_000 })
        small.produce_sync(topic: topic, key: "k" * 1_000, payload: "v" * 1_500)
      },
      "a partition past the topic's count" => -> { producer.produce_sync(topic: topic, partition: 7, payload: "x") },
      "a producer-level setting in a variant" => -> { producer.variant(topic_config: { "linger.ms": 5 }) },
      "an unknown setting in a variant" => -> { producer.variant(topic_config: { "no.such.setting": 1 }) },
      "produce after close" => lambda {
        producer.close
        producer.produce_sync(topic: topic, payload: "x")
      }
    }.transform_values do |mistake|
      mistake.call
      :accepted
    rescue Sluice::Errors::BaseError => e
      [e.class, e.respond_to?(:code) ? e.code : nil]
    end
  end

  it "refuses the same mistakes with the same error class and code" do
    real = mistakes(:real)
    buffered = mistakes(:buffered)
    puts "parity of mistakes: #{real.map { |what, error| "#{what}: #{error.inspect}" }.join("; ")}"
    expect(real.values).not_to include(:accepted)
    expect(buffered).to eq(real)
  end
end
