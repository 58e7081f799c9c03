# frozen_string_literal: true

require "objspace"

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

  it "keeps each delivered handle within its object slot: no malloc'd field table (Ruby 3.1)" do
    skip "Ruby #{RUBY_VERSION} sizes an object to its class's fields: only 3.1 embeds 3 and mallocs the rest" unless RUBY_VERSION < "3.2"

    labeled = producer.produce_async(topic: topic, partition: 0, payload: "labeled", label: :mine) # a label is a rare field
    handles = Array.new(6) { |i| producer.produce_async(topic: topic, partition: i % 3, payload: "slot-#{i}") } << labeled
    reports = handles.map(&:wait)

    expect(reports.map(&:partition)).to eq([0, 1, 2, 0, 1, 2, 0])
    expect(labeled.label).to eq(:mine)
    expect(handles.map { |h| ObjectSpace.memsize_of(h) }).to all(eq(GC::INTERNAL_CONSTANTS[:RVALUE_SIZE]))
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

RSpec.describe "Producing messages and reading them back", :kafka do
  let(:producer) { build_producer }
  let(:three) { "sluice-spec-3p" }
  let(:one) { "sluice-spec-1p" }

  def unique(name) = "#{name}-#{SecureRandom.hex(6)}"

  # Payloads read back for the reports, in report order (whatever partitions they span).
  def payloads_of(reports)
    stored = consume_reports(reports).to_h { |m| [[m[:partition], m[:offset]], m[:payload]] }
    reports.map { |r| stored.fetch([r.partition, r.offset]) }
  end

  describe "#produce_sync" do
    it "returns a Delivery::Report with topic, partition and offset of the stored message" do
      payload = unique("sync")
      report = producer.produce_sync(topic: one, payload: payload, key: "k")

      expect(report).to be_a(Sluice::Delivery::Report)
      expect(report).to have_attributes(topic: one, partition: 0, error: nil, label: nil)
      expect(report).to be_success
      expect(report.offset).to be >= 0
      expect(consume(one, 0, report.offset, 1).first).to include(offset: report.offset, key: "k", payload: payload)
    end

    it "gives later messages higher offsets" do
      # (other runs may write to the shared topic meanwhile: increasing, not necessarily consecutive)
      reports = Array.new(3) { |i| producer.produce_sync(topic: one, payload: "seq-#{i}") }
      expect(reports.map(&:offset).each_cons(2).map { |a, b| b > a }).to eq([true, true])
      expect(consume_reports(reports).map { |m| m[:payload] }).to eq(%w[seq-0 seq-1 seq-2])
    end

    it "keeps binary payloads and keys byte for byte" do
      payload = (0..255).map(&:chr).join.b * 4
      key = "\x00\xFFkey".b
      report = producer.produce_sync(topic: one, payload: payload, key: key)
      message = consume_reports([report]).first
      expect(message[:payload].b).to eq(payload)
      expect(message[:key].b).to eq(key)
    end
  end

  describe "#produce_async and Delivery::Handle" do
    it "returns a pending handle that #wait resolves into the Delivery::Report" do
      slow = build_producer(kafka: { "linger.ms": 300 }) # the message sits in librdkafka's queue a while
      payload = unique("async")
      handle = slow.produce_async(topic: one, payload: payload, label: "mine")

      expect(handle).to be_a(Sluice::Delivery::Handle)
      expect(handle).to be_pending
      expect(handle.report).to be_nil
      expect(handle).to have_attributes(topic: one, label: "mine", partition: nil, offset: nil)
      expect(handle.to_h).to include(partition: nil, offset: nil)

      report = handle.wait
      expect(handle).not_to be_pending
      expect(handle.report).to be(report)
      expect(report).to have_attributes(topic: one, partition: 0, error: nil, label: "mine")
      expect(handle.wait).to be(report) # a resolved handle answers at once, with the same report
      expect(consume_reports([report]).first[:payload]).to eq(payload)
    end

    it "resolves every handle of many concurrent producing threads" do
      handles = Queue.new
      threads = Array.new(4) do |t|
        Thread.new { 25.times { |i| handles << producer.produce_async(topic: three, payload: "t#{t}-#{i}") } }
      end
      threads.each(&:join)
      reports = Array.new(handles.size) { handles.pop.wait }

      expect(reports.size).to eq(100)
      expect(reports.map(&:error)).to all(be_nil)
      expect(reports.map { |r| [r.partition, r.offset] }.uniq.size).to eq(100)
      expect(consume_reports(reports).map { |m| m[:payload] }).to match_array(Array.new(4) { |t| Array.new(25) { |i| "t#{t}-#{i}" } }.flatten)
      expect(producer.outstanding).to eq(0)
    end
  end

  describe "#produce_many_sync and #produce_many_async" do
    it "produce_many_sync returns one report per message, in message order" do
      messages = Array.new(6) { |i| { topic: three, partition: i % 3, payload: "many-sync-#{i}", label: i } }
      reports = producer.produce_many_sync(messages)

      expect(reports.map(&:label)).to eq([0, 1, 2, 3, 4, 5])
      expect(reports.map(&:partition)).to eq([0, 1, 2, 0, 1, 2])
      expect(reports.map(&:error)).to all(be_nil)
      expect(payloads_of(reports)).to eq(Array.new(6) { |i| "many-sync-#{i}" })
    end

    it "produce_many_async returns one handle per message, in message order" do
      messages = Array.new(5) { |i| { topic: one, payload: "many-async-#{i}", key: "k#{i}" } }
      handles = producer.produce_many_async(messages)

      expect(handles.size).to eq(5)
      expect(handles).to all(be_a(Sluice::Delivery::Handle))
      reports = handles.map(&:wait)
      expect(reports.map(&:offset)).to eq(reports.map(&:offset).sort.uniq)
      expect(consume_reports(reports).map { |m| [m[:key], m[:payload]] }).to eq(Array.new(5) { |i| ["k#{i}", "many-async-#{i}"] })
    end

    it "returns nothing for an empty batch" do
      expect(producer.produce_many_sync([])).to eq([])
      expect(producer.produce_many_async([])).to eq([])
    end
  end

  describe "partitions" do
    it "writes to the partition asked for" do
      reports = [2, 0, 1].map { |partition| producer.produce_sync(topic: three, partition: partition, payload: "p#{partition}") }

      expect(reports.map(&:partition)).to eq([2, 0, 1])
      reports.each do |report|
        expect(consume(three, report.partition, report.offset, 1).first).to include(partition: report.partition, payload: "p#{report.partition}")
      end
    end

    it "lets partition -1 mean 'any partition'" do
      report = producer.produce_sync(topic: three, partition: -1, payload: "any", key: "any-key")
      expect(report.partition).to be_between(0, 2)
    end

    it "picks the same partition for the same message key" do
      partitions = Array.new(6) { producer.produce_sync(topic: three, key: "stable-key", payload: "x").partition }
      expect(partitions.uniq.size).to eq(1)
    end

    it "fails a partition the topic does not have with ProduceError :unknown_partition" do
      expect { producer.produce_sync(topic: three, partition: 7, payload: "x") }
        .to raise_error(Sluice::Errors::ProduceError) { |error| expect(error.code).to eq(:unknown_partition) }
    end
  end

  describe "partition_key" do
    it "sends the same partition_key to the same partition every time" do
      partitions = Array.new(8) { |i| producer.produce_sync(topic: three, payload: "pk-#{i}", partition_key: "customer-42").partition }
      expect(partitions.uniq.size).to eq(1)
    end

    it "spreads different partition_keys over the partitions" do
      partitions = Array.new(30) { |i| producer.produce_sync(topic: three, payload: "x", partition_key: "customer-#{i}").partition }
      expect(partitions.uniq.sort).to eq([0, 1, 2])
    end

    it "chooses the partition the message key would choose, while the message keeps its own key" do
      keys = Array.new(10) { |i| "account-#{i}" }
      by_key = keys.map { |k| producer.produce_sync(topic: three, key: k, payload: "by-key").partition }
      reports = keys.map { |k| producer.produce_sync(topic: three, key: "own-key", partition_key: k, payload: "by-partition-key") }

      expect(reports.map(&:partition)).to eq(by_key)
      expect(by_key.uniq.size).to be > 1 # otherwise the comparison proves little
      expect(consume_reports(reports).map { |m| m[:key] }.uniq).to eq(["own-key"])
    end

    it "gives way to an explicit partition" do
      report = producer.produce_sync(topic: three, partition: 2, partition_key: "whatever", payload: "x")
      expect(report.partition).to eq(2)
    end

    it "is used when partition is given as nil (nil partition means 'not given')" do
      expected = producer.produce_sync(topic: three, payload: "x", partition_key: "nil-partition").partition
      partitions = Array.new(9) { producer.produce_sync(topic: three, payload: "x", partition_key: "nil-partition", partition: nil).partition }
      expect(partitions.uniq).to eq([expected])
    end
  end

  describe "headers" do
    it "reads back String headers, Array headers as repeated headers, and nil values" do
      report = producer.produce_sync(topic: one, payload: "h", headers: { "trace" => "abc", "tags" => %w[x y z], "empty" => nil, "none" => [] })
      expect(consume_reports([report]).first[:headers]).to eq([%w[trace abc], %w[tags x], %w[tags y], %w[tags z], ["empty", nil]])
    end

    it "sends no headers for an empty Hash" do
      report = producer.produce_sync(topic: one, payload: "h", headers: {})
      expect(consume_reports([report]).first[:headers]).to eq([])
    end

    it "keeps binary header values" do
      report = producer.produce_sync(topic: one, payload: "h", headers: { "bin" => "\x00\x01\xFF".b })
      expect(consume_reports([report]).first[:headers].map { |name, value| [name, value.b] }).to eq([["bin", "\x00\x01\xFF".b]])
    end
  end

  describe "timestamps" do
    it "stores a Time with millisecond precision" do
      report = producer.produce_sync(topic: one, payload: "t", timestamp: Time.at(1_600_000_000, 987_654, :usec))
      expect(consume_reports([report]).first[:timestamp]).to eq(1_600_000_000_987)
    end

    it "stores Integer milliseconds as given" do
      report = producer.produce_sync(topic: one, payload: "t", timestamp: 1_234_567_890_123)
      expect(consume_reports([report]).first[:timestamp]).to eq(1_234_567_890_123)
    end

    it "refuses the epoch itself (timestamp: 0), which librdkafka would silently replace with now" do
      expect { producer.produce_sync(topic: one, payload: "t", timestamp: 0) }
        .to raise_error(Sluice::Errors::MessageInvalidError, /timestamp 0/)
    end

    # librdkafka reads a timestamp of 0 as "not set" and stamps the current
    # time: a Time at or before the epoch must be refused, or stored as given,
    # but never silently replaced by now.
    {
      "Time.at(0)" => [Time.at(0), 0],
      "Time.at(0) plus 400 microseconds" => [Time.at(0, 400, :usec), 0],
      "a Time 5 s before the epoch" => [Time.at(-5), -5_000],
      "a Time half a millisecond before the epoch" => [Time.at(-1, 999_500, :usec), -1]
    }.each do |what, (timestamp, ms)|
      it "refuses #{what} or stores it as given (#{ms} ms), never as the current time" do
        report = begin
          producer.produce_sync(topic: one, payload: "epoch", timestamp: timestamp)
        rescue Sluice::Errors::MessageInvalidError => e
          expect(e.message).to match(/timestamp/)
          next
        end
        expect(consume_reports([report]).first[:timestamp]).to eq(ms)
      end
    end

    it "uses the current time without a timestamp" do
      before = (Time.now.to_f * 1000).floor
      report = producer.produce_sync(topic: one, payload: "t")
      after = (Time.now.to_f * 1000).ceil
      expect(consume_reports([report]).first[:timestamp]).to be_between(before, after)
    end
  end

  describe "tombstones and empty messages" do
    it "reads back a nil payload as nil (a tombstone), with its key" do
      report = producer.produce_sync(topic: one, key: "deleted-id", payload: nil)
      expect(consume_reports([report]).first).to include(key: "deleted-id", payload: nil)
    end

    it "tells a tombstone from an empty payload" do
      reports = [producer.produce_sync(topic: one, key: "a", payload: nil), producer.produce_sync(topic: one, key: "b", payload: "")]
      expect(consume_reports(reports).map { |m| m[:payload] }).to eq([nil, ""])
    end

    it "tells an empty key from no key" do
      reports = [producer.produce_sync(topic: one, key: "", payload: "empty key"), producer.produce_sync(topic: one, payload: "no key")]
      expect(consume_reports(reports).map { |m| m[:key] }).to eq(["", nil])
    end

    it "accepts a message with neither key nor payload" do
      report = producer.produce_sync(topic: one)
      expect(consume_reports([report]).first).to include(key: nil, payload: nil)
    end
  end

  describe "label" do
    it "comes back on the report, on the handle and on message.acknowledged, as the very same object" do
      label = { request: SecureRandom.hex(4) }
      acks = Queue.new
      producer.monitor.subscribe("message.acknowledged") { |event| acks << event[:label] }
      handle = producer.produce_async(topic: one, payload: "l", label: label)
      report = handle.wait

      expect(report.label).to be(label)
      expect(handle.label).to be(label)
      expect(pop_within(acks)).to be(label)
    end
  end

  describe "idempotent producer" do
    it "delivers in produce order" do
      idempotent = build_producer(kafka: { "enable.idempotence": true, "linger.ms": 5 })
      run = SecureRandom.hex(4)
      handles = Array.new(300) { |i| idempotent.produce_async(topic: "sluice-spec-many", payload: "idem-#{run}-#{i}") }
      reports = handles.map(&:wait)

      offsets = reports.map(&:offset)
      expect(reports.map(&:error).compact).to eq([])
      expect(offsets).to eq(offsets.sort.uniq)
      stored = consume("sluice-spec-many", 0, offsets.first, offsets.last - offsets.first + 1).map { |m| m[:payload] }
      expect(stored.grep(/\Aidem-#{run}-/)).to eq(Array.new(300) { |i| "idem-#{run}-#{i}" })
    end
  end
end
