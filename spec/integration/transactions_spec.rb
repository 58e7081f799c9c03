# frozen_string_literal: true

RSpec.describe "Transactions and idempotence", :kafka, timeout: 120 do
  let(:topic) { "sluice-spec-txn" }
  let(:producer) { build_producer(kafka: { "transactional.id": "sluice-spec-#{SecureRandom.hex(4)}" }) }

  def committed_payloads(from_offset, count)
    consume(topic, 0, from_offset, count, isolation: "read_committed").map { |m| m[:payload] }
  end

  it "commits on normal exit, aborts on error (re-raised) and on AbortTransaction (quietly)" do
    first = producer.transaction { producer.produce_sync(topic: topic, payload: "committed-1") }
    # Aborts wait for the delivery first: aborting while librdkafka still registers the
    # partition with the coordinator can fail with INVALID_TXN_STATE (librdkafka issue 4849).
    expect do
      producer.transaction do
        producer.produce_sync(topic: topic, payload: "aborted-1")
        raise ArgumentError, "no"
      end
    end
      .to raise_error(ArgumentError, "no")
    quiet = producer.transaction do
      producer.produce_sync(topic: topic, payload: "aborted-2")
      raise Sluice::AbortTransaction
    end
    value = producer.transaction do
      producer.transaction { producer.produce_async(topic: topic, payload: "nested") } # joins the outer one
      producer.produce_async(topic: topic, payload: "committed-2")
      :block_value
    end

    expect(quiet).to be_nil
    expect(value).to eq(:block_value)
    expect(committed_payloads(first.offset, 3)).to eq(%w[committed-1 nested committed-2])
  end

  it "refuses #transaction on a producer without transactional.id" do
    plain = build_producer
    expect { plain.transaction {} }.to raise_error(Sluice::Errors::TransactionError, /transactional.id/)
  end

  it "delivers in order with an idempotent producer" do
    idempotent = build_producer(kafka: { "enable.idempotence": true })
    reports = Array.new(100) { |i| idempotent.produce_async(topic: "sluice-spec-1p", payload: i.to_s) }.map(&:wait)

    expect(consume_reports(reports).map { |m| m[:payload] }).to eq(Array.new(100, &:to_s))
  end
end

RSpec.describe "Events", :kafka do
  it "emits statistics as a Hash when statistics.interval.ms is set" do
    stats = Queue.new
    producer = build_producer(kafka: { "statistics.interval.ms": 100 })
    producer.monitor.subscribe("statistics.emitted") { |event| stats << event.payload }

    payload = stats.pop
    expect(payload[:producer_id]).to eq(producer.id)
    expect(payload[:statistics]).to include("name", "msg_cnt", "brokers")
  end

  it "emits librdkafka errors as error.occurred" do
    errors = Queue.new
    producer = build_producer(kafka: { "bootstrap.servers": "127.0.0.1:1" })
    producer.monitor.subscribe("error.occurred") { |event| errors << event.payload }

    error = errors.pop
    expect(error).to include(type: "librdkafka.error", producer_id: producer.id)
    expect(error[:error].code).to eq(:transport).or eq(:all_brokers_down)
  end

  it "reports a raising subscriber as error.occurred and keeps delivering" do
    producer = build_producer
    errors = Queue.new
    producer.monitor.subscribe("error.occurred") { |event| errors << event.payload }
    producer.monitor.subscribe("message.acknowledged") { raise "subscriber bug" }

    producer.produce_sync(topic: "sluice-spec-1p", payload: "1")
    expect(errors.pop).to include(type: "callbacks.listener.error", event_id: "message.acknowledged")
    expect(producer.produce_sync(topic: "sluice-spec-1p", payload: "2").error).to be_nil
  end

  it "creates and closes many producers without leaking threads or file descriptors" do
    build_producer.close # warm-up: the first producer loads what stays loaded
    fds = open_fds
    threads = live_threads
    30.times { build_producer.tap { |p| p.produce_sync(topic: "sluice-spec-1p", payload: "x") }.close }

    expect(open_fds).to be <= fds # a per-cycle leak would show as +30/+200; other specs' garbage may close a few
    expect(live_threads).to be <= threads
  end
end
