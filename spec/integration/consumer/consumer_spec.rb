# frozen_string_literal: true

# Sluice::Consumer against the real broker, in the polling mode of the run
# (SLUICE_POLLING_MODE): what it hands out, how offsets are stored and
# committed, positions, the catalogue of errors, and closing.
RSpec.describe Sluice::Consumer, :kafka do
  include PollingScenarios

  let(:topic) { "sluice-spec-consumer" }
  let(:group) { "sluice-spec-consumer-#{rand(1 << 30)}" }
  let(:producer) { build_producer }

  def build_consumer(group_id: group, **kafka, &block) = super(group_id: group_id, "auto.offset.reset": "earliest", **kafka, &block)

  # Produces to partition 0 and returns the delivery reports.
  def produce(count, partition: 0, **message)
    Array.new(count) { |i| producer.produce_sync(topic: topic, partition: partition, payload: "m#{i}", **message) }
  end

  # Reads with each_message until `count` messages came (then stops).
  def read(consumer, count)
    seen = []
    consumer.each_message do |message|
      seen << message
      consumer.stop if seen.size >= count
    end
    seen
  end

  describe "what it hands out" do
    it "gives keys, binary payloads, headers, timestamps and tombstones back exactly as produced" do
      binary = (0..255).map(&:chr).join.b
      at = Time.at(1_700_000_000, 123, :millisecond)
      first = producer.produce_sync(topic: topic, partition: 0, key: "k\x00\xff".b, payload: binary,
                                    headers: { "trace" => "t-1", "empty" => "" }, timestamp: at)
      producer.produce_sync(topic: topic, partition: 0, key: "gone", payload: nil)
      consumer = build_consumer
      consumer.assign(topic => { 0 => first.offset })

      message, tombstone = read(consumer, 2)
      expect(message).to be_a(Sluice::Message)
      expect([message.topic, message.partition, message.offset]).to eq([topic, 0, first.offset])
      expect(message.key).to eq("k\x00\xff".b)
      expect(message.payload).to eq(binary)
      expect(message.payload.encoding).to eq(Encoding::BINARY)
      expect(message.headers).to eq("trace" => "t-1", "empty" => "")
      expect(message.timestamp).to eq(at)
      expect(tombstone.key).to eq("gone")
      expect(tombstone.payload).to be_nil
      expect(tombstone).to be_tombstone
    end

    it "maps a header name given more than once to its values in order" do
      report = producer.produce_sync(topic: topic, partition: 0, payload: "h", headers: { "a" => %w[1 3], "b" => "2" })
      consumer = build_consumer
      consumer.assign(topic => { 0 => report.offset })

      message = read(consumer, 1).first
      expect(message.headers).to eq("a" => %w[1 3], "b" => "2")
      expect(message.header_pairs).to eq([%w[a 1], %w[a 3], %w[b 2]])
    end

    it "reads a subscribed topic as a group member, reporting the assignment" do
      reports = produce(3)
      consumer = build_consumer
      assigned = record_events(consumer.monitor, "consumer.partitions_assigned")
      consumer.subscribe(topic)

      offsets = []
      consumer.each_message do |message|
        offsets << message.offset if message.partition.zero? && message.offset >= reports.first.offset
        consumer.stop if offsets.size == 3
      end
      expect(offsets).to eq(reports.map(&:offset))
      expect(assigned.events.first[:partitions]).to eq(topic => [0, 1, 2])
      expect(consumer.assignment).to eq(topic => [0, 1, 2])
    end

    it "returns nil from poll when nothing comes within the timeout, and a Message when one does" do
      consumer = build_consumer
      high = producer.produce_sync(topic: topic, partition: 1, payload: "p").offset + 1
      consumer.assign(topic => { 1 => high })
      expect(consumer.poll(300)).to be_nil

      report = producer.produce_sync(topic: topic, partition: 1, payload: "late")
      message = nil
      message = consumer.poll(1_000) until message
      expect([message.offset, message.payload]).to eq([report.offset, "late"])
    end
  end

  describe "offsets (at least once)" do
    it "stores a message's offset once each_message's block returned; close commits it" do
      reports = produce(3)
      consumer = build_consumer
      consumer.assign(topic => { 0 => reports.first.offset })
      read(consumer, 3)
      consumer.close

      committed = build_consumer.tap { |c| c.assign(topic => [0]) }.committed
      expect(committed).to eq(topic => { 0 => reports.last.offset + 1 })
    end

    # Issue 53, item 5: sluice read "0" as on, and committed at close (and before a revoke) itself.
    it "commits nothing at close with enable.auto.commit off, spelt as librdkafka reads it (\"0\")" do
      reports = produce(2)
      consumer = build_consumer("enable.auto.commit": "0")
      consumer.assign(topic => { 0 => reports.first.offset })
      read(consumer, 2)
      consumer.close

      committed = build_consumer.tap { |c| c.assign(topic => [0]) }.committed
      expect(committed).to eq(topic => { 0 => -1001 })
    end

    it "does not store the offset of a message whose block raised; the group reads it again" do
      reports = produce(3)
      consumer = build_consumer
      consumer.subscribe(topic)
      calls = 0
      expect do
        consumer.each_message do |message|
          next unless message.partition.zero? && message.offset >= reports.first.offset

          calls += 1
          raise "processing failed" if message.offset == reports[1].offset
        end
      end.to raise_error(RuntimeError, "processing failed")
      expect(calls).to eq(2)
      consumer.close

      again = build_consumer
      again.subscribe(topic)
      first = nil
      again.each_message do |message|
        next unless message.partition.zero?

        first = message
        again.stop
      end
      expect(first.offset).to eq(reports[1].offset)
    end

    it "stores a batch's offsets once each_batch's block returned" do
      reports = produce(5)
      consumer = build_consumer("enable.auto.commit": false)
      consumer.assign(topic => { 0 => reports.first.offset })
      seen = []
      consumer.each_batch(max_items: 10, max_wait: 200) do |batch|
        expect(batch).to all(be_a(Sluice::Message))
        seen.concat(batch)
        consumer.stop if seen.size >= 5
      end
      consumer.commit
      expect(seen.map(&:offset)).to eq(reports.map(&:offset))
      expect(consumer.committed).to eq(topic => { 0 => reports.last.offset + 1 })
    end

    it "commits what store_offset stored, synchronously, and asynchronously with consumer.offsets_committed" do
      reports = produce(2)
      consumer = build_consumer("enable.auto.commit": false)
      committed = record_events(consumer.monitor, "consumer.offsets_committed")
      consumer.assign(topic => { 0 => reports.first.offset })
      first = nil
      first = consumer.poll(1_000) until first
      expect(consumer.committed).to eq(topic => { 0 => -1001 }) # poll stores nothing by itself

      consumer.store_offset(first)
      consumer.commit
      expect(consumer.committed).to eq(topic => { 0 => first.offset + 1 })

      second = nil
      second = consumer.poll(1_000) until second
      consumer.store_offset(second)
      consumer.commit(async: true)
      event = committed.await { |e| e[:partitions]&.dig(topic, 0) == second.offset + 1 }
      expect(event[:error]).to be_nil
      expect(consumer.committed).to eq(topic => { 0 => second.offset + 1 })
    end

    it "commits explicit offsets, stored or not" do
      consumer = build_consumer("enable.auto.commit": false)
      consumer.assign(topic => [1])
      high = consumer.query_watermark_offsets(topic, 1).last
      consumer.commit(topic => { 1 => high })
      expect(consumer.committed).to eq(topic => { 1 => high })
    end

    it "reports the lag of each assigned partition from its committed offset" do
      reports = produce(4, partition: 2)
      consumer = build_consumer("enable.auto.commit": false)
      consumer.assign(topic => { 2 => reports.first.offset })
      read(consumer, 1)
      consumer.commit
      expect(consumer.lag).to eq(topic => { 2 => 3 })
    end
  end

  describe "positions" do
    it "seeks: the next message is the one at the offset" do
      reports = produce(4)
      consumer = build_consumer
      consumer.assign(topic => { 0 => reports.first.offset })
      expect(read(consumer, 1).first.offset).to eq(reports[0].offset)

      consumer.seek(topic, 0, reports[3].offset)
      expect(consumer.poll(5_000).offset).to eq(reports[3].offset)
      consumer.seek(topic, 0, reports[1].offset)
      expect(consumer.poll(5_000).offset).to eq(reports[1].offset)
    end

    it "pauses a partition (nothing of it is handed out) and resumes it" do
      consumer = build_consumer
      high = producer.produce_sync(topic: topic, partition: 1, payload: "before").offset + 1
      consumer.assign(topic => { 1 => high })
      consumer.pause(topic, 1)
      report = producer.produce_sync(topic: topic, partition: 1, payload: "while paused")
      expect(consumer.poll(1_000)).to be_nil

      consumer.resume(topic, 1)
      message = nil
      message = consumer.poll(1_000) until message
      expect(message.offset).to eq(report.offset)
    end

    it "refuses seek and pause of a partition it does not have, saying which" do
      consumer = build_consumer
      consumer.assign(topic => [0])
      expect { consumer.seek(topic, 2, 0) }.to raise_error(Sluice::Errors::ConsumerStateError, %r{#{topic}/2 is not assigned})
      expect { consumer.pause("other", 0) }.to raise_error(Sluice::Errors::ConsumerStateError, /not assigned/)
    end
  end

  describe "bad configuration and calls" do
    it "refuses a consumer without group.id" do
      expect { described_class.new { |c| c.kafka = { "bootstrap.servers": TestKafka::BROKERS } } }
        .to raise_error(Sluice::Errors::ConfigurationInvalidError, /group\.id/)
    end

    it "refuses a producer-only property and an unknown one, naming them" do
      expect { build_consumer("transactional.id": "t") }.to raise_error(Sluice::Errors::ConfigurationInvalidError, /transactional\.id/)
      expect { build_consumer("no.such.property": 1) }.to raise_error(Sluice::Errors::ConfigurationInvalidError, /no\.such\.property/)
    end

    it "refuses bad arguments with ArgumentErrors that say what was expected, before anything reaches librdkafka" do
      consumer = build_consumer
      {
        -> { consumer.subscribe(42) } => /topic is a non-empty String or Symbol, got 42/,
        -> { consumer.subscribe } => /at least one topic/,
        -> { consumer.subscribe("") } => /non-empty String or Symbol, got ""/,
        -> { consumer.poll("soon") } => /timeout_ms is a number of milliseconds >= 0, got "soon"/,
        -> { consumer.poll(-5) } => /got -5/,
        -> { consumer.poll(10, stor: true) } => /unknown keyword: :stor/,
        -> { consumer.poll(store: true) } => /wrong number of arguments \(given 0, expected 1\)/,
        -> { consumer.poll(nil) } => /got nil/,
        -> { consumer.each_batch(max_wait: -1) { nil } } => /max_wait is a number of milliseconds/,
        -> { consumer.each_batch(max_items: 0) { nil } } => /max_items must be a positive Integer, got 0/,
        -> { consumer.assign([topic, 0]) } => /assign takes/,
        -> { consumer.assign(topic => ["0"]) } => /partition is an Integer >= 0, got "0"/,
        -> { consumer.assign(topic => { 0 => "start" }) } => /offset is an Integer, got "start"/,
        -> { consumer.seek(topic, -1, 0) } => /partition is an Integer >= 0, got -1/,
        -> { consumer.seek(topic, 0, nil) } => /offset is an Integer, got nil/,
        -> { consumer.pause(nil, 0) } => /topic is a non-empty String or Symbol, got nil/,
        -> { consumer.store_offset("message") } => /store_offset takes a Sluice::Message, got String/,
        -> { consumer.commit([[topic, 0, 1]]) } => /commit takes \{ topic => \{ partition => offset \} \}/,
        -> { consumer.commit(topic => 5) } => /commit takes/,
        -> { consumer.query_watermark_offsets(topic, "0") } => /partition is an Integer/
      }.each do |call, message|
        expect(&call).to raise_error(ArgumentError, message)
      end
      expect { consumer.close(timeout: "soon") }.to raise_error(ArgumentError, /close's timeout is a positive number of milliseconds/)
      expect(consumer.assignment).to eq({})
      consumer.subscribe(topic.to_sym) # a Symbol is a topic name
      expect(consumer.close).to be_nil # documented: nothing to hand back
    end

    # :thread mode's polling thread waits on the main queue while the close
    # commits and leaves the group (each wait starts afresh, every 100 ms): it
    # was refused ("consumer is closing", reported as poller.error) when one
    # started in that window.
    it "keeps its main queue served while it closes: a wait for events is not refused" do
      consumer = build_consumer
      consumer.assign(topic => [0])
      client = consumer.instance_variable_get(:@client)
      expect(client.close_start(1_000)).to be(true) # the closing state, as close enters it
      expect(Thread.new { client.wait_events(10) }.value).to be(true).or be(false)
      other_call = Thread.new do
        Thread.current.report_on_exception = false
        client.assignment
      end
      expect { other_call.join }.to raise_error(Sluice::Errors::ConsumerClosedError, /closing/) # a group call still is
    end

    it "refuses every call after close with ConsumerClosedError" do
      consumer = build_consumer
      consumer.close
      expect(consumer).to be_closed
      %i[assignment committed lag commit].each do |call|
        expect { consumer.public_send(call) }.to raise_error(Sluice::Errors::ConsumerClosedError)
      end
      expect { consumer.subscribe(topic) }.to raise_error(Sluice::Errors::ConsumerClosedError)
      expect { consumer.poll(10) }.to raise_error(Sluice::Errors::ConsumerClosedError)
      expect { consumer.each_message { nil } }.to raise_error(Sluice::Errors::ConsumerClosedError)
    end

    it "allows one reader at a time" do
      consumer = build_consumer
      consumer.assign(topic => [0])
      reading = Queue.new
      reader = Thread.new { consumer.each_message { nil }.tap { reading.close } }
      spin_until(what: "the reader") { consumer.instance_variable_get(:@inbox).reading? }
      expect { consumer.poll(10) }.to raise_error(Sluice::Errors::ConsumerStateError, /already being read/)
      consumer.stop
      expect(reader.join(10)).to be(reader)
    end
  end

  describe "#stop and #close" do
    it "stops each_message from another thread while it waits" do
      consumer = build_consumer
      consumer.assign(topic => { 1 => producer.produce_sync(topic: topic, partition: 1, payload: "x").offset + 1 })
      reader = Thread.new { consumer.each_message { nil } }
      spin_until(what: "the reader") { consumer.instance_variable_get(:@inbox).reading? }
      consumer.stop
      expect(reader.join(10)).to be(reader)
      expect(consumer).not_to be_closed
    end

    it "closes from another thread while each_message waits: each_message returns, close emits consumer.closed once" do
      consumer = build_consumer
      closed = record_events(consumer.monitor, "consumer.closed")
      consumer.subscribe(topic)
      reader = Thread.new { consumer.each_message { nil } }
      spin_until(what: "the reader") { consumer.instance_variable_get(:@inbox).reading? }
      consumer.close
      expect(reader.join(10)).to be(reader)
      expect(reader.value).to be_nil
      consumer.close
      expect(consumer).to be_closed
      expect(closed.events.size).to eq(1)
    end

    it "closes from inside the block: after that message, each_message returns and the offset is committed" do
      reports = produce(3)
      consumer = build_consumer
      consumer.assign(topic => { 0 => reports.first.offset })
      handed = []
      consumer.each_message do |message|
        handed << message.offset
        consumer.close
      end
      expect(handed).to eq([reports.first.offset])
      expect(consumer).to be_closed
      expect(build_consumer.tap { |c| c.assign(topic => [0]) }.committed).to eq(topic => { 0 => reports.first.offset + 1 })
    end

    it "closes from a listener on the polling thread (statistics.emitted) while another thread reads" do
      consumer = build_consumer("statistics.interval.ms": 100)
      consumer.subscribe(topic)
      consumer.monitor.subscribe("statistics.emitted") { consumer.close }
      reader = Thread.new { consumer.each_message { nil } }
      expect(reader.join(15)).to be(reader)
      spin_until(what: "the close") { consumer.closed? }
    end

    it "leaves the group on close: revokes (consumer.partitions_revoked) and a new member gets every partition" do
      consumer = build_consumer
      assigned = record_events(consumer.monitor, "consumer.partitions_assigned")
      revoked = record_events(consumer.monitor, "consumer.partitions_revoked")
      consumer.subscribe(topic)
      consumer.poll(100) until assigned.events.any?
      consumer.close
      expect(revoked.events.map { |e| e[:partitions] }).to eq([{ topic => [0, 1, 2] }])

      successor = build_consumer
      got = record_events(successor.monitor, "consumer.partitions_assigned")
      successor.subscribe(topic)
      successor.poll(100) until got.events.any?
      expect(successor.assignment).to eq(topic => [0, 1, 2])
    end
  end

  describe "background events" do
    it "emits statistics on time while the application spends long in one message's block" do
      report = producer.produce_sync(topic: topic, partition: 0, payload: "slow")
      consumer = build_consumer("statistics.interval.ms": 100)
      stats = record_events(consumer.monitor, "statistics.emitted")
      consumer.assign(topic => { 0 => report.offset })
      during = nil
      consumer.each_message do
        before = stats.events.size
        deadline = monotonic + 1.5
        Thread.pass while monotonic < deadline # the application busy in its block, holding the GVL as Ruby code does
        during = stats.events.size - before
        consumer.stop
      end
      expect(during).to be >= 5 # 15 intervals; the polling thread runs whenever the GVL lets it
    end

    it "is a client of its poller in :fd mode: poller.consumer_registered, then unregistered on close" do
      skip "the shared poller is the :fd engine" unless TestKafka::MODE == :fd

      poller = Sluice::Polling::Poller.new
      monitor = Sluice::Monitor.new(logger: Logger.new(nil))
      events = record_events(monitor, "poller.consumer_registered", "poller.consumer_unregistered")
      consumer = build_consumer do |config|
        config.polling.poller = poller
        config.monitor = monitor
      end
      expect(poller.count).to eq(1)
      consumer.close
      expect(poller.count).to eq(0)
      expect(events.events.map(&:id)).to eq(%w[poller.consumer_registered poller.consumer_unregistered])
    end
  end
end
