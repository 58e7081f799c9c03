# frozen_string_literal: true

# The producer's state and the WaterDrop-named events around it: status,
# idempotent?/transactional?, purge, partition_count, and the produce,
# lifecycle and transaction events.
RSpec.describe "Producer status and events (#{TestKafka::MODE} mode)", :kafka do
  let(:topic) { "sluice-spec-1p" }

  describe "#status" do
    it "is :connected once built, :closed after close, and :closing while close runs" do
      producer = build_producer
      expect(producer.status).to eq(:connected)
      seen = []
      producer.monitor.subscribe("producer.closing") { seen << producer.status }
      expect(producer.close).to be_nil # documented: nothing to hand back, as the consumer's and the admin's
      expect(seen).to eq([:closing])
      expect(producer.status).to eq(:closed)
    end
  end

  describe "#idempotent? and #transactional?" do
    it "follow enable.idempotence and transactional.id" do
      expect(build_producer).to have_attributes(idempotent?: false, transactional?: false)
      expect(build_producer(kafka: { "enable.idempotence": true })).to have_attributes(idempotent?: true, transactional?: false)
      txn = build_producer(kafka: { "transactional.id": "sluice-status-#{rand(1 << 30)}" })
      expect(txn).to have_attributes(idempotent?: true, transactional?: true)
    end
  end

  describe "#partition_count" do
    it "reads the topic's partitions from metadata" do
      producer = build_producer
      expect(producer.partition_count("sluice-spec-3p")).to eq(3)
      expect(producer.partition_count(:"sluice-spec-1p")).to eq(1)
    end
  end

  describe "#purge" do
    it "drops what is queued: handles resolve with the purge error, message.purged and buffer.purged are emitted" do
      producer = build_unreachable_producer
      events = record_events(producer.monitor, "message.purged", "buffer.purged")
      handles = Array.new(3) { |i| producer.produce_async(topic: topic, payload: "p#{i}", label: i) }
      producer.buffer(topic: topic, payload: "buffered")

      expect(producer.purge).to be_nil
      reports = handles.map { |h| h.wait(max_wait_timeout: 5_000, raise_response_error: false) }
      expect(reports.map { |r| r.error.code }).to all(satisfy { |code| %i[purge_queue purge_inflight].include?(code) })
      expect { handles.first.wait }.to raise_error(Sluice::Errors::ProduceError)
      events.await { |e| e.id == "message.purged" && e[:label] == 2 }
      expect(events.events.count { |e| e.id == "message.purged" }).to eq(3)
      expect(events.events.count { |e| e.id == "buffer.purged" }).to eq(1)
      expect(producer.buffered).to be_empty
      expect(producer.outstanding).to eq(0)
      producer.close!
    end

    it "raises ProducerClosedError once closed" do
      producer = build_producer
      producer.close
      expect { producer.purge }.to raise_error(Sluice::Errors::ProducerClosedError)
    end
  end

  describe "events" do
    it "refuses an unknown event name, listing the known ones" do
      expect { build_producer.monitor.subscribe("message.producedd") { nil } }
        .to raise_error(ArgumentError, /unknown event "message\.producedd" \(events: .*message\.produced_async.*producer\.reloaded/)
    end

    it "accepts every event name WaterDrop users subscribe to" do
      names = %w[message.produced_async message.produced_sync messages.produced_async messages.produced_sync
                 message.buffered messages.buffered buffer.flushed_async buffer.flushed_sync message.purged
                 transaction.started transaction.committed transaction.aborted transaction.finished
                 producer.connected producer.closing producer.closed producer.reloaded]
      monitor = build_producer.monitor
      names.each { |name| expect { monitor.subscribe(name) { nil } }.not_to raise_error }
    end

    it "emits producer.connected, producer.closing and producer.closed, in that order, on a shared monitor" do
      monitor = Sluice::Monitor.new(logger: Logger.new(nil))
      events = record_events(monitor, "producer.connected", "producer.closing", "producer.closed")
      producer = build_producer(monitor: monitor, id: "status-events")
      producer.close
      expect(events.events.map { |e| [e.id, e[:producer_id]] })
        .to eq([["producer.connected", "status-events"], ["producer.closing", "status-events"], ["producer.closed", "status-events"]])
    end

    it "emits message.produced_async/sync with the message and how long the call took" do
      producer = build_producer
      events = record_events(producer.monitor, "message.produced_async", "message.produced_sync")
      message = { topic: topic, payload: "a" }
      producer.produce_async(message).wait
      producer.produce_sync(topic: topic, payload: "s")
      expect(events.events.map(&:id)).to eq(%w[message.produced_async message.produced_sync])
      expect(events.events.first[:message]).to be(message)
      expect(events.events.first[:producer_id]).to eq(producer.id)
      expect(events.events.map { |e| e[:time] }).to all(be_a(Float).and(be >= 0))
    end

    it "emits messages.produced_async/sync with the batch" do
      producer = build_producer
      events = record_events(producer.monitor, "messages.produced_async", "messages.produced_sync")
      batch = [{ topic: topic, payload: "1" }, { topic: topic, payload: "2" }]
      producer.produce_many_async(batch).each(&:wait)
      producer.produce_many_sync(batch)
      expect(events.events.map(&:id)).to eq(%w[messages.produced_async messages.produced_sync])
      expect(events.events.map { |e| e[:messages].size }).to eq([2, 2])
    end

    it "emits no produce event for a message refused by validation" do
      producer = build_producer
      events = record_events(producer.monitor, "message.produced_async")
      expect { producer.produce_async(topic: topic, payload: 1) }.to raise_error(Sluice::Errors::MessageInvalidError)
      expect(events.events).to be_empty
    end

    it "emits transaction.started, committed / aborted and finished around transactions" do
      producer = build_producer(kafka: { "transactional.id": "sluice-status-txn-#{rand(1 << 30)}" })
      events = record_events(producer.monitor, "transaction.started", "transaction.committed", "transaction.aborted",
                             "transaction.finished")
      producer.transaction { producer.produce_async(topic: "sluice-spec-txn", payload: "c") }
      producer.transaction do
        producer.produce_sync(topic: "sluice-spec-txn", payload: "a")
        raise Sluice::AbortTransaction
      end
      expect(events.events.map(&:id)).to eq(%w[transaction.started transaction.committed transaction.finished
                                               transaction.started transaction.aborted transaction.finished])
      expect(events.events.select { |e| e.id == "transaction.finished" }.map { |e| e[:time] }).to all(be > 0)
    end

    it "emits one set of transaction events for nested transaction blocks" do
      producer = build_producer(kafka: { "transactional.id": "sluice-status-nested-#{rand(1 << 30)}" })
      events = record_events(producer.monitor, "transaction.started", "transaction.finished")
      producer.transaction { producer.transaction { producer.produce_async(topic: "sluice-spec-txn", payload: "n") } }
      expect(events.events.map(&:id)).to eq(%w[transaction.started transaction.finished])
    end
  end
end
