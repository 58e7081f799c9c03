# frozen_string_literal: true

RSpec.describe "Instrumentation of a live producer", :kafka do
  let(:topic) { "sluice-spec-3p" }

  describe "message.acknowledged" do
    it "carries producer_id, topic, partition, offset and label of each delivered message" do
      producer = build_producer
      acks = Queue.new
      producer.monitor.subscribe("message.acknowledged") { |event| acks << event }
      report = producer.produce_sync(topic: topic, partition: 1, payload: "ack-me", label: [:order, 1])

      event = pop_within(acks)
      expect(event.id).to eq("message.acknowledged")
      expect(event.to_h).to eq(producer_id: producer.id, topic: topic, partition: 1, offset: report.offset, label: [:order, 1])
    end

    it "is instrumented once per message" do
      producer = build_producer
      offsets = Queue.new
      producer.monitor.subscribe("message.acknowledged") { |event| offsets << event[:offset] }
      reports = producer.produce_many_sync(Array.new(20) { |i| { topic: "sluice-spec-1p", payload: "n#{i}" } })
      producer.close # every event was dispatched when close returns

      expect(Array.new(offsets.size) { offsets.pop }).to match_array(reports.map(&:offset))
    end

    it "reaches a listener object subscribed to a monitor shared by two producers, telling them apart" do
      listener = Class.new do
        attr_reader :seen

        def initialize = @seen = Queue.new
        def on_message_acknowledged(event) = @seen << event[:producer_id]
      end.new
      monitor = Sluice::Monitor.new(logger: Logger.new(nil))
      monitor.subscribe(listener)
      first = build_producer(monitor: monitor, id: "shared-monitor-a")
      second = build_producer(monitor: monitor, id: "shared-monitor-b")
      first.produce_sync(topic: topic, payload: "a")
      second.produce_sync(topic: topic, payload: "b")

      expect([pop_within(listener.seen), pop_within(listener.seen)]).to contain_exactly("shared-monitor-a", "shared-monitor-b")
    end
  end

  describe "a raising message.acknowledged listener" do
    it "is reported as error.occurred (callbacks.listener.error) and polling goes on for later messages" do
      producer = build_producer
      errors = Queue.new
      calls = Queue.new
      producer.monitor.subscribe("error.occurred") { |event| errors << event }
      producer.monitor.subscribe("message.acknowledged") do |event|
        calls << event[:offset]
        raise "listener bug"
      end

      first = producer.produce_sync(topic: topic, payload: "one")
      error = pop_within(errors)
      expect(error.to_h).to include(producer_id: producer.id, type: "callbacks.listener.error", event_id: "message.acknowledged")
      expect(error[:error]).to be_a(RuntimeError)
      expect(error[:error].message).to eq("listener bug")

      later = Array.new(5) { |i| producer.produce_sync(topic: topic, payload: "later-#{i}") }
      expect(later.map(&:error)).to all(be_nil)
      expect(Array.new(6) { pop_within(calls) }).to eq([first, *later].map(&:offset))
      expect(Array.new(5) { pop_within(errors)[:type] }).to eq(["callbacks.listener.error"] * 5)
    end
  end

  describe "statistics.emitted" do
    it "delivers librdkafka's statistics as a Hash every statistics.interval.ms" do
      producer = build_producer(kafka: { "statistics.interval.ms": 100 })
      stats = Queue.new
      producer.monitor.subscribe("statistics.emitted") { |event| stats << event }

      event = pop_within(stats)
      expect(event[:producer_id]).to eq(producer.id)
      statistics = event[:statistics]
      expect(statistics).to be_a(Hash)
      expect(statistics).to include("name", "msg_cnt", "type" => "producer")
      expect(statistics["msg_cnt"]).to be_a(Integer)
      expect(statistics["name"]).to start_with(producer.config.kafka_setting("client.id") || "rdkafka")
      expect(pop_within(stats)[:statistics]["ts"]).to be > statistics["ts"] # and it keeps coming
    end

    it "is not parsed or emitted without statistics.interval.ms" do
      producer = build_producer
      stats = []
      producer.monitor.subscribe("statistics.emitted") { |event| stats << event }
      producer.produce_sync(topic: topic, payload: "x")
      producer.close
      expect(stats).to eq([])
    end
  end

  describe "librdkafka's log lines" do
    # "debug": "msg" makes librdkafka log every message: log events and delivery
    # reports then arrive mixed in the same drained batch.
    let(:debug_msg) { { "debug": "msg", "linger.ms": 5 } }

    # Reports come in produce order: once the last one is in (or 2 s passed), look at all of them.
    def outcomes_of(handles)
      begin
        handles.last.wait(max_wait_timeout: 2_000, raise_response_error: false)
      rescue Sluice::Errors::WaitTimeoutError
        nil
      end
      handles.map { |handle| handle.pending? ? :never_resolved : handle.report.error }
    end

    it "go to config.logger, tagged with the producer id" do
      log = StringIO.new
      producer = build_producer(kafka: debug_msg, logger: Logger.new(log, level: Logger::DEBUG))
      producer.produce_sync(topic: "sluice-spec-1p", payload: "logged")
      producer.close

      expect(log.string).to include("[#{producer.id}]")
      expect(log.string.lines.size).to be > 1
    end

    it "never cost a delivery report when the logger raises", :aggregate_failures do
      broken = Class.new(Logger) { def add(*) = raise(IOError, "log device gone") }.new(nil)
      producer = build_producer(kafka: debug_msg, logger: broken)
      handles = Array.new(5) { |i| producer.produce_async(topic: "sluice-spec-1p", payload: "broken-logger-#{i}") }

      outcomes = outcomes_of(handles)
      producer.close
      expect(outcomes).to eq([nil] * 5)
      expect(handles.count(&:pending?)).to eq(0) # and close leaves no handle pending
    end

    it "never cost a delivery report when config.logger is nil (refused up front, or no logging)" do
      producer = begin
        build_producer(kafka: debug_msg, logger: nil)
      rescue Sluice::Errors::ConfigurationInvalidError => e
        expect(e.message).to match(/logger/)
        next
      end
      handles = Array.new(5) { |i| producer.produce_async(topic: "sluice-spec-1p", payload: "nil-logger-#{i}") }

      expect(outcomes_of(handles)).to eq([nil] * 5)
    end
  end

  describe "error.occurred from librdkafka" do
    it "reports an unreachable broker as librdkafka.error (:transport or :all_brokers_down)" do
      monitor = Sluice::Monitor.new(logger: Logger.new(nil)) # subscribed before the first connection attempt
      events = record_events(monitor, "error.occurred")
      producer = build_unreachable_producer(monitor: monitor)

      event = events.await { |e| e[:type] == "librdkafka.error" }
      expect(event[:producer_id]).to eq(producer.id)
      expect(event[:error]).to be_a(Sluice::KafkaError)
      expect(%i[transport all_brokers_down]).to include(event[:error].code)
      expect(event[:error].fatal?).to be(false)
      expect(event[:error].message).to match(/127\.0\.0\.1:1|brokers/i)
      producer.close!
    end

    it "reports both the transport failure and all brokers being down" do
      monitor = Sluice::Monitor.new(logger: Logger.new(nil))
      events = record_events(monitor, "error.occurred")
      producer = build_unreachable_producer(monitor: monitor)

      expect(events.await { |e| e[:error].code == :transport }[:type]).to eq("librdkafka.error")
      expect(events.await { |e| e[:error].code == :all_brokers_down }[:type]).to eq("librdkafka.error")
      producer.close!
    end
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
end
