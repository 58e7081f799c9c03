# frozen_string_literal: true

RSpec.describe Sluice::Monitor, "subscriptions" do
  subject(:monitor) { described_class.new(logger: logger) }

  let(:log) { StringIO.new }
  let(:logger) { Logger.new(log) }

  it "knows exactly the documented events" do
    expect(described_class::EVENTS).to contain_exactly(
      "message.produced_async", "message.produced_sync", "messages.produced_async", "messages.produced_sync",
      "message.buffered", "messages.buffered", "buffer.flushed_async", "buffer.flushed_sync", "buffer.purged",
      "message.acknowledged", "message.purged", "error.occurred", "statistics.emitted", "oauthbearer.token_refresh",
      "transaction.started", "transaction.committed", "transaction.aborted", "transaction.finished",
      "producer.connected", "producer.closing", "producer.closed", "producer.reload", "producer.reloaded",
      "poller.budget_exceeded", "poller.producer_registered", "poller.producer_unregistered",
      "consumer.partitions_assigned", "consumer.partitions_revoked", "consumer.revoke_waiting", "consumer.offsets_committed",
      "consumer.offsets_left_behind", "consumer.offsets_recovered",
      "consumer.partition_eof", "consumer.retry", "consumer.dead_lettered", "consumer.retry_scheduled", "consumer.retry_waiting",
      "consumer.connected", "consumer.closing", "consumer.closed",
      "poller.consumer_registered", "poller.consumer_unregistered",
      "share_consumer.acknowledgements_committed", "share_consumer.closing", "share_consumer.closed",
      "admin.connected", "admin.request", "admin.closing", "admin.closed", "poller.admin_registered", "poller.admin_unregistered",
      "connection_pool.created", "connection_pool.setup", "connection_pool.reload", "connection_pool.reloaded", "connection_pool.shutdown"
    )
  end

  describe "#subscribe with a block" do
    it "calls the block with an Event carrying the name and the payload, and returns the block" do
      seen = []
      block = proc { |event| seen << event }
      expect(monitor.subscribe("producer.closed", &block)).to be(block)

      payload = { producer_id: "p1" }
      expect(monitor.instrument("producer.closed", payload)).to be(payload)
      expect(seen.size).to eq(1)
      event = seen.first
      expect(event.id).to eq("producer.closed")
      expect(event[:producer_id]).to eq("p1")
      expect(event.fetch(:producer_id)).to eq("p1")
      expect(event.to_h).to eq(producer_id: "p1")
      expect { event.fetch(:missing) }.to raise_error(KeyError)
    end

    it "accepts the event name as a Symbol" do
      seen = []
      monitor.subscribe(:"producer.closed") { |event| seen << event.id }
      monitor.instrument("producer.closed", producer_id: "p")
      expect(seen).to eq(["producer.closed"])
    end

    it "calls only the listeners of the instrumented event, in subscription order" do
      seen = []
      monitor.subscribe("message.acknowledged") { seen << :first }
      monitor.subscribe("error.occurred") { seen << :other_event }
      monitor.subscribe("message.acknowledged") { seen << :second }
      monitor.instrument("message.acknowledged", producer_id: "p")
      expect(seen).to eq(%i[first second])
    end

    it "refuses an unknown event name, listing the known ones" do
      expect { monitor.subscribe("message.acked") { nil } }
        .to raise_error(ArgumentError, /unknown event "message\.acked" \(events: message\.produced_async, .*message\.acknowledged, message\.purged/)
      expect(monitor.listening?("message.acked")).to be(false)
    end
  end

  describe "#subscribe with a listener object" do
    let(:listener_class) do
      Class.new do
        attr_reader :calls

        def initialize = @calls = []
        def on_message_acknowledged(event) = @calls << [:ack, event[:offset]]
        def on_error_occurred(event) = @calls << [:error, event[:type]]
      end
    end

    it "calls on_<event> for every event the object answers, and returns the object" do
      listener = listener_class.new
      expect(monitor.subscribe(listener)).to be(listener)
      monitor.instrument("message.acknowledged", offset: 3)
      monitor.instrument("error.occurred", type: "librdkafka.error")
      monitor.instrument("producer.closed", producer_id: "p")
      expect(listener.calls).to eq([[:ack, 3], [:error, "librdkafka.error"]])
      expect(monitor.listening?("producer.closed")).to be(false)
    end

    it "refuses an object with no on_<event> method" do
      expect { monitor.subscribe(Object.new) }.to raise_error(ArgumentError, /has no on_<event> method/)
    end
  end

  describe "#unsubscribe" do
    it "removes a block, leaving the other listeners" do
      seen = []
      first = monitor.subscribe("message.acknowledged") { seen << :first }
      monitor.subscribe("message.acknowledged") { seen << :second }
      monitor.unsubscribe(first)
      monitor.instrument("message.acknowledged", producer_id: "p")
      expect(seen).to eq([:second])
    end

    it "removes every method of a listener object, and listening? turns false" do
      listener = Class.new do
        attr_reader :calls

        def initialize = @calls = 0
        def on_message_acknowledged(_event) = @calls += 1
        def on_statistics_emitted(_event) = @calls += 1
      end.new
      monitor.subscribe(listener)
      monitor.unsubscribe(listener)
      monitor.instrument("message.acknowledged", producer_id: "p")
      monitor.instrument("statistics.emitted", producer_id: "p")
      expect(listener.calls).to eq(0)
      expect(monitor.listening?("message.acknowledged")).to be(false)
      expect(monitor.listening?("statistics.emitted")).to be(false)
    end

    it "leaves the list being iterated untouched when a listener unsubscribes during instrument" do
      seen = []
      second = proc { seen << :second }
      monitor.subscribe("message.acknowledged") do
        seen << :first
        monitor.unsubscribe(second)
      end
      monitor.subscribe("message.acknowledged", &second)
      monitor.instrument("message.acknowledged", producer_id: "p")
      monitor.instrument("message.acknowledged", producer_id: "p")
      expect(seen).to eq(%i[first second first])
    end
  end

  describe "a listener that raises" do
    it "is reported as error.occurred (callbacks.listener.error) and the other listeners still run" do
      errors = []
      later = []
      boom = RuntimeError.new("listener failed")
      monitor.subscribe("error.occurred") { |event| errors << event.to_h }
      monitor.subscribe("message.acknowledged") { raise boom }
      monitor.subscribe("message.acknowledged") { |event| later << event[:offset] }

      expect { monitor.instrument("message.acknowledged", producer_id: "p7", offset: 11) }.not_to raise_error
      expect(later).to eq([11])
      expect(errors).to eq([{ producer_id: "p7", type: "callbacks.listener.error", error: boom, event_id: "message.acknowledged" }])
    end

    it "is reported the same way when it is a listener object" do
      errors = []
      listener = Class.new { def on_producer_closed(_event) = raise(ArgumentError, "nope") }.new
      monitor.subscribe(listener)
      monitor.subscribe("error.occurred") { |event| errors << event }
      monitor.instrument("producer.closed", producer_id: "p")
      expect(errors.map { |e| [e[:type], e[:error].class, e[:event_id]] })
        .to eq([["callbacks.listener.error", ArgumentError, "producer.closed"]])
    end

    it "is only logged when it listens to error.occurred itself (no endless loop), and the others still run" do
      seen = []
      monitor.subscribe("error.occurred") { raise "broken error listener" }
      monitor.subscribe("error.occurred") { |event| seen << event[:type] }
      monitor.instrument("error.occurred", producer_id: "p", type: "librdkafka.error")
      expect(seen).to eq(["librdkafka.error"])
      expect(log.string).to include("error.occurred listener raised RuntimeError: broken error listener")
    end

    it "does not swallow non-StandardError exceptions" do
      monitor.subscribe("producer.closed") { raise NoMemoryError, "real trouble" }
      expect { monitor.instrument("producer.closed", producer_id: "p") }.to raise_error(NoMemoryError)
    end
  end

  describe "#listening?" do
    it "is true only while someone listens to that event" do
      expect(monitor.listening?("statistics.emitted")).to be(false)
      block = monitor.subscribe("statistics.emitted") { nil }
      expect(monitor.listening?("statistics.emitted")).to be(true)
      expect(monitor.listening?("message.acknowledged")).to be(false)
      monitor.unsubscribe(block)
      expect(monitor.listening?("statistics.emitted")).to be(false)
    end
  end
end
