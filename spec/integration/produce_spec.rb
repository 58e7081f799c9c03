# frozen_string_literal: true

RSpec.describe "Producing to a real broker", :kafka do
  let(:producer) { build_producer }
  let(:topic) { "sluice-spec-3p" }

  it "delivers a message with key, headers and timestamp and reads it back" do
    time = Time.at(1_700_000_000, 123, :millisecond)
    report = producer.produce_sync(topic: topic, payload: "hello", key: "k1", headers: { "a" => "1", "b" => %w[x y] },
                                   timestamp: time)

    expect(report).to have_attributes(topic: topic, error: nil)
    expect(report.offset).to be >= 0
    message = consume_reports([report]).first
    expect(message).to include(payload: "hello", key: "k1", timestamp: 1_700_000_000_123,
                               headers: [%w[a 1], %w[b x], %w[b y]])
  end

  it "accepts the topic as a Symbol, as WaterDrop does" do
    report = producer.produce_sync(topic: :"sluice-spec-1p", payload: "symbol")
    expect(report.topic).to eq("sluice-spec-1p")
    expect(producer.produce_many_sync([{ topic: :"sluice-spec-1p", payload: "many" }]).first).to be_success
    expect(consume_reports([report]).first).to include(payload: "symbol")
  end

  it "produces asynchronously: handles resolve to reports with offsets, in order per partition" do
    handles = Array.new(50) { |i| producer.produce_async(topic: topic, partition: 1, payload: "m#{i}", timestamp: 1_700_000_000_000 + i) }
    reports = handles.map(&:wait)

    expect(handles).to all(satisfy { |h| !h.pending? })
    expect(reports.map(&:partition).uniq).to eq([1])
    expect(reports.map(&:offset)).to eq((reports.first.offset...(reports.first.offset + 50)).to_a)
    expect(consume_reports(reports).map { |m| [m[:payload], m[:timestamp]] })
      .to eq(Array.new(50) { |i| ["m#{i}", 1_700_000_000_000 + i] })
  end

  it "produces many messages at once, sync and async" do
    reports = producer.produce_many_sync(Array.new(10) { |i| { topic: topic, payload: "s#{i}", partition: 2 } })
    handles = producer.produce_many_async(Array.new(10) { |i| { topic: topic, payload: "a#{i}", partition: 0 } })

    expect(reports.map(&:error)).to all(be_nil)
    expect(consume_reports(reports).map { |m| m[:payload] }).to eq(Array.new(10) { |i| "s#{i}" })
    expect(consume_reports(handles.map(&:wait)).map { |m| m[:payload] }).to eq(Array.new(10) { |i| "a#{i}" })
  end

  it "sends a tombstone for a nil payload and returns the label on the report" do
    report = producer.produce_sync(topic: topic, key: "gone", payload: nil, label: { order: 7 })

    expect(report.label).to eq(order: 7)
    expect(consume_reports([report]).first).to include(key: "gone", payload: nil)
  end

  it "sends messages with the same partition_key to the same partition, and spreads different keys" do
    same = Array.new(5) { producer.produce_sync(topic: topic, payload: "x", partition_key: "user-42").partition }
    spread = Array.new(30) { |i| producer.produce_sync(topic: topic, payload: "x", partition_key: "user-#{i}").partition }

    expect(same.uniq.size).to eq(1)
    expect(spread.uniq.size).to be > 1
  end

  it "refuses a message over message.max.bytes with ProduceError :msg_size_too_large" do
    small = build_producer(kafka: { "message.max.bytes": 10_000 })

    expect { small.produce_async(topic: topic, payload: "x" * 20_000) }
      .to raise_error(Sluice::Errors::ProduceError) { |e| expect(e.code).to eq(:msg_size_too_large) }
    expect(small.outstanding).to eq(0)
  end

  it "surfaces the broker refusing a message in the delivery report and as error.occurred" do
    errors = Queue.new
    producer.monitor.subscribe("error.occurred") { |event| errors << event.payload }
    handle = producer.produce_async(topic: "sluice-spec-small", payload: "x" * 5_000)

    expect { handle.wait }.to raise_error(Sluice::Errors::ProduceError) { |e| expect(e.code).to eq(:msg_size_too_large) }
    expect(handle.wait(raise_response_error: false).error.code).to eq(:msg_size_too_large)
    expect(errors.pop).to include(type: "librdkafka.dispatch_error", topic: "sluice-spec-small")
  end

  it "reports every delivery as message.acknowledged" do
    acks = Queue.new
    producer.monitor.subscribe("message.acknowledged") { |event| acks << event.payload }
    report = producer.produce_sync(topic: topic, payload: "ack")

    expect(acks.pop).to eq(producer_id: producer.id, topic: topic, partition: report.partition, offset: report.offset, label: nil)
  end
end

RSpec.describe "Waiting, closing and purging", :kafka do
  let(:producer) { build_producer }
  let(:unreachable) { build_producer(kafka: { "bootstrap.servers": "127.0.0.1:1" }) }

  it "raises WaitTimeoutError and keeps the handle pending; close! then resolves it with an error" do
    handle = unreachable.produce_async(topic: "sluice-spec-1p", payload: "x")

    expect { handle.wait(max_wait_timeout: 100) }.to raise_error(Sluice::Errors::WaitTimeoutError)
    expect(handle).to be_pending
    unreachable.close!
    expect(handle.wait(raise_response_error: false).error.code).to eq(:purge_queue)
  end

  it "close! resolves every purged handle with a purge error" do
    handles = Array.new(100) { unreachable.produce_async(topic: "sluice-spec-1p", payload: "x") }
    unreachable.close!

    expect(handles.map { |h| h.wait(raise_response_error: false).error&.code }.uniq).to eq([:purge_queue])
  end

  it "close with thousands of messages outstanding loses none" do
    handles = Array.new(5_000) { |i| producer.produce_async(topic: "sluice-spec-many", payload: i.to_s) }
    producer.close

    reports = handles.map { |h| h.wait(max_wait_timeout: 0.001) } # resolved already: no waiting
    expect(reports.map(&:error)).to all(be_nil)
    expect(reports.map(&:offset).uniq.size).to eq(5_000)
  end

  it "is idempotent, emits producer.closed once and refuses later messages" do
    closed = []
    producer.monitor.subscribe("producer.closed") { |event| closed << event[:producer_id] }
    producer.close
    producer.close

    expect(closed).to eq([producer.id])
    expect(producer).to be_closed
    expect { producer.produce_sync(topic: "sluice-spec-1p", payload: "x") }.to raise_error(Sluice::Errors::ProducerClosedError)
  end

  it "flushes on demand" do
    handles = Array.new(200) { producer.produce_async(topic: "sluice-spec-1p", payload: "f") }

    expect(producer.flush(10_000)).to be(true)
    expect(handles.none?(&:pending?)).to be(true)
  end
end
