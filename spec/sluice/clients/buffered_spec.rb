# frozen_string_literal: true

require "zlib"

# The in-memory clients (config.client_class) under the real producer: no
# broker anywhere in this file (bootstrap.servers names a port nothing listens on).
RSpec.describe "Sluice::Clients::Buffered and Dummy" do
  def build(client_class = Sluice::Clients::Buffered, kafka: {})
    producer = Sluice::Producer.new do |config|
      config.kafka = { "bootstrap.servers": SpecHelpers::UNREACHABLE }.merge(kafka)
      config.client_class = client_class
      config.polling.mode = TestKafka::MODE
    end
    test_producers << producer
    producer
  end

  let(:producer) { build }

  it "keeps every message as produced, with key, headers, partition and label" do
    producer.produce_sync(topic: "events", payload: "a", key: "k", headers: { "h" => "v" }, partition: 2, label: :first)
    producer.produce_async(topic: :events, payload: "b").wait

    expect(producer.client.messages).to eq([{ topic: "events", payload: "a", key: "k", headers: { "h" => "v" }, partition: 2, label: :first },
                                            { topic: :events, payload: "b" }])
    expect(producer.client.messages_for("events").size).to eq(2)
    expect(producer.client.messages_for(:other)).to eq([])
  end

  it "forgets the messages on reset" do
    producer.produce_sync(topic: "events", payload: "a")
    producer.client.reset
    expect(producer.client.messages).to eq([])
  end

  it "resolves handles at once, with offsets counted per topic-partition" do
    handles = [producer.produce_async(topic: "a", payload: "1"), producer.produce_async(topic: "a", payload: "2"),
               producer.produce_async(topic: "a", payload: "3", partition: 1), producer.produce_async(topic: "b", payload: "4")]

    expect(handles.map(&:pending?)).to all(be(false))
    expect(handles.map { |h| [h.topic, h.partition, h.offset] }).to eq([["a", 0, 0], ["a", 0, 1], ["a", 1, 0], ["b", 0, 0]])
    expect(handles.first.wait).to be(handles.first)
    expect(handles.first.error).to be_nil
  end

  it "places keyed messages as librdkafka's default partitioner (CRC32) over the partition counts given" do
    producer.client.partition_counts["events"] = 6
    reports = %w[alpha beta gamma].map { |key| producer.produce_sync(topic: "events", payload: "x", key: key) }
    by_partition_key = producer.produce_sync(topic: "events", payload: "x", key: "ignored", partition_key: "delta")

    expect(reports.map(&:partition)).to eq(%w[alpha beta gamma].map { |key| Zlib.crc32(key) % 6 })
    expect(by_partition_key.partition).to eq(Zlib.crc32("delta") % 6)
    expect(producer.partition_count("events")).to eq(6)
  end

  it "returns a report from produce_sync and reports from produce_many_sync, in order" do
    report = producer.produce_sync(topic: "events", payload: "one")
    reports = producer.produce_many_sync([{ topic: "events", payload: "two" }, { topic: "events", payload: "three" }])

    expect(report).to be_a(Sluice::Delivery::Report).and(have_attributes(topic: "events", partition: 0, offset: 0))
    expect(reports.map(&:offset)).to eq([1, 2])
    expect(producer.client.messages.map { |m| m[:payload] }).to eq(%w[one two three])
  end

  it "refuses invalid messages with the native client's own errors, keeping none" do
    real = Sluice::Native::Producer.allocate # validation only: no librdkafka handle
    invalid = [{ topic: "bad topic", payload: "x" }, { topic: "t", payload: 1 }, { topic: "t", headers: { "h" => 1 } }, "nope"]

    invalid.each do |message|
      expected = begin
        real.validate(message)
      rescue Sluice::Errors::MessageInvalidError => e
        e.message
      end
      expect { producer.produce_sync(message) }.to raise_error(Sluice::Errors::MessageInvalidError, expected)
    end
    expect { producer.produce_many_sync([{ topic: "ok", payload: "x" }, { topic: "", payload: "y" }]) }
      .to raise_error(Sluice::Errors::MessageInvalidError)
    expect(producer.client.messages).to eq([])
  end

  it "runs the middleware before keeping a message" do
    producer.middleware.append(->(message) { message.merge(headers: { "traced" => "yes" }) })
    producer.produce_sync(topic: "events", payload: "x")
    expect(producer.client.messages.last).to eq(topic: "events", payload: "x", headers: { "traced" => "yes" })
  end

  it "produces through variants and buffers" do
    variant = producer.with(topic_config: { "acks" => "all" }, max_wait_timeout: 1_000)
    variant.produce_sync(topic: "events", payload: "variant")
    producer.buffer(topic: "events", payload: "buffered")
    expect(producer.client.messages.size).to eq(1)

    producer.flush_sync
    expect(producer.client.messages.map { |m| m[:payload] }).to eq(%w[variant buffered])
  end

  it "keeps a transaction's messages when it commits and drops them when it aborts" do
    producer = build(kafka: { "transactional.id": "buffered-spec" })
    events = record_events(producer.monitor, "transaction.committed", "transaction.aborted")

    producer.transaction { producer.produce_async(topic: "events", payload: "committed") }
    producer.transaction do
      producer.produce_async(topic: "events", payload: "aborted")
      expect(producer.client.messages.map { |m| m[:payload] }).to eq(%w[committed])
      raise Sluice::AbortTransaction
    end
    expect { producer.transaction { raise "boom" } }.to raise_error("boom")

    expect(producer.client.messages.map { |m| m[:payload] }).to eq(%w[committed])
    expect(events.events.map(&:id)).to eq(%w[transaction.committed transaction.aborted transaction.aborted])
  end

  it "runs a transactional producer's produce outside a block in a transaction of its own, as the real one" do
    producer = build(kafka: { "transactional.id": "buffered-spec-own" })
    events = record_events(producer.monitor, "transaction.committed")
    producer.produce_sync(topic: "events", payload: "x")
    expect(events.events.size).to eq(1)
    expect(producer.client.messages.size).to eq(1)
  end

  it "refuses a transaction without transactional.id, as the real producer" do
    expect { producer.transaction { nil } }.to raise_error(Sluice::Errors::TransactionError, /transactional.id/)
  end

  it "emits the producer's events, message.acknowledged included (through the poller)" do
    events = record_events(producer.monitor, "message.produced_async", "message.produced_sync", "message.acknowledged")
    producer.produce_async(topic: "events", payload: "a", label: :async)
    producer.produce_sync(topic: "events", payload: "b", label: :sync)

    acks = [events.await { |e| e.id == "message.acknowledged" && e[:label] == :async },
            events.await { |e| e.id == "message.acknowledged" && e[:label] == :sync }]
    expect(acks.map { |e| e[:offset] }).to eq([0, 1])
    expect(events.events.map(&:id).first(2)).to eq(%w[message.produced_async message.produced_sync])
  end

  it "flushes once the acknowledgements were dispatched" do
    events = record_events(producer.monitor, "message.acknowledged")
    5.times { |i| producer.produce_async(topic: "events", payload: i.to_s) }
    expect(producer.flush(5_000)).to be(true)
    expect(events.events.size).to eq(5)
  end

  it "closes: later produces raise ProducerClosedError, the client's pipe is closed" do
    producer = build
    fds = open_fds
    producer.produce_sync(topic: "events", payload: "x")
    producer.close

    expect(producer).to be_closed
    expect(producer.client).to be_closed
    expect { producer.produce_sync(topic: "events", payload: "y") }.to raise_error(Sluice::Errors::ProducerClosedError)
    expect(open_fds).to be < fds
    expect(producer.client.messages.size).to eq(1)
  end

  it "Dummy accepts and drops: handles resolve, nothing is kept" do
    producer = build(Sluice::Clients::Dummy)
    report = producer.produce_sync(topic: "events", payload: "x")
    expect(report).to have_attributes(topic: "events", partition: 0, offset: 0, error: nil)
    expect(producer.client).not_to respond_to(:messages)
    expect { producer.produce_sync(topic: "events", payload: 1) }.to raise_error(Sluice::Errors::MessageInvalidError)
  end

  it "leaves the poller idle once its acknowledgements are drained (no re-arming)" do
    poller = Sluice::Polling::Poller.new
    producer = Sluice::Producer.new do |config|
      config.client_class = Sluice::Clients::Buffered
      config.polling.poller = poller
    end
    test_producers << producer
    3.times { producer.produce_async(topic: "events", payload: "x") }
    expect(producer.flush(5_000)).to be(true)
    expect(poller.stats[:rearms]).to eq(0)
  end

  it "sends delimited lines as the native client does (produce_lines), one kept message a line" do
    empties = []
    result = producer.produce_lines("lines", "a\n\nbb\nccc", delimiter: "\n", partition: 1, empties: empties)

    expect(result).to eq([9, 5, 3, nil]) # stopped at the end of data, after line 4; three messages
    expect(producer.client.messages).to eq([{ topic: "lines", payload: "a", partition: 1 }, { topic: "lines", payload: "bb", partition: 1 },
                                            { topic: "lines", payload: "ccc", partition: 1 }])
    expect(empties).to eq([2])
    expect(producer.line_reports).to eq([3, []])
    expect(producer.produce_lines("lines", "x;y;z", delimiter: ";", offset: 2, line: 7, max: 1)).to eq([4, 8, 1, nil])
    expect(producer.client.messages.last).to eq(topic: "lines", payload: "y")
  end

  it "stops produce_lines at a record it refuses, as the native client, with the error" do
    producer = build(kafka: { "message.max.bytes": 4 })
    offset, line, sent, error = producer.produce_lines("lines", "ok\ntoo long\nnever", delimiter: "\n")

    expect([offset, line, sent]).to eq([3, 2, 1])
    expect(error.code).to eq(:msg_size_too_large)
    expect(producer.client.messages.map { |message| message[:payload] }).to eq(["ok"])
  end

  it "Dummy sends lines too, keeping none" do
    producer = build(Sluice::Clients::Dummy)
    expect(producer.produce_lines("lines", "a\nb\n", delimiter: "\n")).to eq([4, 3, 2, nil])
    expect(producer.line_reports).to eq([2, []])
  end

  it "validates client_class" do
    expect { build(String) }.to raise_error(Sluice::Errors::ConfigurationInvalidError, /client_class must be a producer client class/)
  end
end
