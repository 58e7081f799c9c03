# frozen_string_literal: true

RSpec.describe "Producer lifecycle", :kafka do
  let(:producer) { build_producer }
  let(:topic) { "sluice-spec-1p" }

  describe "#close" do
    it "marks the producer closed and refuses every later produce with ProducerClosedError" do
      producer.produce_sync(topic: topic, payload: "before close")
      expect(producer).not_to be_closed
      producer.close
      expect(producer).to be_closed

      message = { topic: topic, payload: "after close" }
      expect { producer.produce_async(message) }.to raise_error(Sluice::Errors::ProducerClosedError, /producer #{producer.id} is closed/)
      expect { producer.produce_sync(message) }.to raise_error(Sluice::Errors::ProducerClosedError)
      expect { producer.produce_many_async([message]) }.to raise_error(Sluice::Errors::ProducerClosedError)
      expect { producer.produce_many_sync([message]) }.to raise_error(Sluice::Errors::ProducerClosedError)
      expect { producer.flush }.to raise_error(Sluice::Errors::ProducerClosedError)
      expect(producer.outstanding).to eq(0)
    end

    it "refuses an invalid message after close with ProducerClosedError too (closed is checked first)" do
      producer.close
      expect { producer.produce_async(payload: 1) }.to raise_error(Sluice::Errors::ProducerClosedError)
    end

    it "is idempotent and emits producer.closed exactly once" do
      closed = []
      producer.monitor.subscribe("producer.closed") { |event| closed << event.to_h }

      producer.close
      producer.close
      producer.close!
      expect(producer).to be_closed
      expect(closed).to eq([{ producer_id: producer.id }])
    end

    it "emits producer.closed once when many threads close at the same time" do
      closed = Queue.new
      producer.monitor.subscribe("producer.closed") { |event| closed << event[:producer_id] }
      producer.produce_async(topic: topic, payload: "x")

      gate = Queue.new
      threads = Array.new(5) do
        Thread.new do
          gate.pop
          producer.close
        end
      end
      5.times { gate << :go }
      threads.each(&:join)

      expect(closed.size).to eq(1)
      expect(closed.pop).to eq(producer.id)
    end

    it "registers with its poller on creation and unregisters on close" do
      monitor = Sluice::Monitor.new(logger: Logger.new(nil)) # subscribed before Producer.new sees it
      events = record_events(monitor, "poller.producer_registered", "poller.producer_unregistered")
      producer = build_producer(monitor: monitor)
      producer.produce_sync(topic: topic, payload: "x")
      producer.close

      expect(events.events.map { |e| [e.id, e[:producer_id]] })
        .to eq([["poller.producer_registered", producer.id], ["poller.producer_unregistered", producer.id]])
      expect(events.events.map { |e| e[:poller_id] }.uniq).to eq([TestKafka::MODE == :fd ? 0 : nil])
    end

    it "loses none of 5,000 messages produced just before it" do
      handles = Array.new(5_000) { |i| producer.produce_async(topic: "sluice-spec-many", payload: "close-#{i}") }
      producer.close

      expect(handles.count(&:pending?)).to eq(0)
      reports = handles.map(&:report)
      expect(reports.map(&:error).compact).to eq([])
      offsets = reports.map(&:offset)
      expect(offsets.uniq.size).to eq(5_000)
      expect(offsets).to eq(offsets.sort) # one partition: stored in produce order
      expect(producer.outstanding).to eq(0)
      tail = consume_reports(reports.last(3)).map { |m| m[:payload] }
      expect(tail).to eq(%w[close-4997 close-4998 close-4999])
    end

    it "acknowledges every message it flushed as message.acknowledged before producer.closed" do
      order = Queue.new
      producer.monitor.subscribe("message.acknowledged") { order << :ack }
      producer.monitor.subscribe("producer.closed") { order << :closed }
      50.times { |i| producer.produce_async(topic: topic, payload: "a#{i}") }
      producer.close

      events = Array.new(order.size) { order.pop }
      expect(events).to eq([:ack] * 50 + [:closed])
    end
  end

  describe "#flush" do
    it "returns true once every message produced so far has its report" do
      handles = Array.new(100) { |i| producer.produce_async(topic: topic, payload: "f#{i}") }
      expect(producer.flush).to be(true)
      expect(handles.count(&:pending?)).to eq(0)
      expect(producer.outstanding).to eq(0)
    end

    # A listener that gives up the GVL (any I/O: a logger writing to a socket, a
    # metrics client...) lets other threads run while the poller is halfway
    # through a batch of delivery reports. Thread.pass does that deterministically.
    it "returns only once every handle is resolved, even when a listener lets other threads run" do
      producer.monitor.subscribe("message.acknowledged") { Thread.pass }
      handles = Array.new(300) { |i| producer.produce_async(topic: "sluice-spec-many", payload: "yield-#{i}") }

      expect(producer.flush).to be(true)
      expect(handles.count(&:pending?)).to eq(0)
    end
  end

  describe "#close!" do
    it "on a healthy producer with nothing outstanding just closes" do
      report = producer.produce_sync(topic: topic, payload: "x")
      producer.close!
      expect(producer).to be_closed
      expect(report.error).to be_nil
    end
  end

  describe "#inspect" do
    it "names the id, the polling mode and whether it is open" do
      expect(producer.inspect).to eq("#<Sluice::Producer id=#{producer.id.inspect} mode=#{TestKafka::MODE} open>")
      producer.close
      expect(producer.inspect).to end_with(" closed>")
    end
  end
end
