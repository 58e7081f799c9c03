# frozen_string_literal: true

# What happens to what was already handed over when a call fails half-way:
# produce_many_* stopped by a full queue, and close bounded by its timeout.
RSpec.describe "Partial failures", :kafka do
  describe "produce_many_async failing part-way" do
    # queue.buffering.max.messages = 5 and an unreachable broker: the 6th
    # message finds the local queue full and nothing will empty it.
    let(:producer) do
      build_unreachable_producer(kafka: { "queue.buffering.max.messages": 5 }, wait_on_queue_full: false)
    end

    it "raises ProduceManyError carrying the handles of the messages already enqueued, and enqueues nothing twice" do
      batch = Array.new(8) { |i| { topic: "sluice-spec-1p", payload: "m#{i}", label: i } }

      expect { producer.produce_many_async(batch) }.to raise_error(Sluice::Errors::ProduceManyError) do |error|
        expect(error).to be_a(Sluice::Errors::ProduceError) # rescue clauses for ProduceError still catch it
        expect(error.code).to eq(:queue_full)
        expect(error.dispatched.map(&:label)).to eq([0, 1, 2, 3, 4])
        expect(error.dispatched).to all(be_pending)
        expect(error.message).to match(/after 5 message\(s\) of the batch were enqueued/)
      end
      expect(producer.outstanding).to eq(5)
      producer.close!
    end

    it "raises from produce_many_sync the same way, before waiting for anything" do
      batch = Array.new(7) { |i| { topic: "sluice-spec-1p", payload: "s#{i}" } }
      expect { producer.produce_many_sync(batch) }
        .to raise_error(Sluice::Errors::ProduceManyError) { |error| expect(error.dispatched.size).to eq(5) }
      producer.close!
    end

    it "raises what validation raises, before enqueuing anything" do
      expect { producer.produce_many_async([{ topic: "sluice-spec-1p", payload: "ok" }, { payload: "no topic" }]) }
        .to raise_error(Sluice::Errors::MessageInvalidError)
      expect(producer.outstanding).to eq(0)
      producer.close!
    end
  end

  describe "produce_many_sync on a queue that fills up, with wait_on_queue_full" do
    it "waits for room at the message that did not fit and goes on from there: each message sent exactly once" do
      producer = build_producer(kafka: { "queue.buffering.max.messages": 10 }, wait_backoff_on_queue_full: 5)
      id = SecureRandom.hex(4)
      reports = producer.produce_many_sync(Array.new(60) { |i| { topic: "sluice-spec-many", payload: "#{id}-#{i}" } })

      expect(reports.map(&:error)).to all(be_nil)
      payloads = consume_reports(reports).map { |m| m[:payload] }
      expect(payloads).to eq(Array.new(60) { |i| "#{id}-#{i}" })
      last = reports.map(&:offset).max
      expect(consume("sluice-spec-many", 0, reports.map(&:offset).min, last - reports.map(&:offset).min + 1)
        .count { |m| m[:payload].start_with?(id) }).to eq(60) # no duplicate in between either
    end
  end

  describe "close with a broker that never answers" do
    let(:producer) { build_unreachable_producer(max_wait_timeout: 500) }

    it "is bounded by max_wait_timeout by default, then purges: each handle resolves with :purge_queue and is reported as message.purged" do
      purged = record_events(producer.monitor, "message.purged")
      handles = Array.new(5) { |i| producer.produce_async(topic: "sluice-spec-1p", payload: "bounded #{i}", label: i) }

      guards = "purging before max_wait_timeout (0.5 s), or waiting past it for message.timeout.ms (300 s)"
      expect_within(5, at_least: 0.45, guards: guards) { producer.close }

      expect(handles.map { |h| h.wait(raise_response_error: false).error&.code }).to eq([:purge_queue] * 5)
      expect(purged.events.map { |e| e[:label] }).to match_array([0, 1, 2, 3, 4])
      expect(purged.events.map { |e| e.to_h.slice(:producer_id, :topic) }.uniq).to eq([{ producer_id: producer.id, topic: "sluice-spec-1p" }])
    end

    it "waits for every report with close(timeout: nil): here until message.timeout.ms expires them" do
      producer = build_unreachable_producer(kafka: { "message.timeout.ms": 1_500 }, max_wait_timeout: 200)
      purged = record_events(producer.monitor, "message.purged")
      handles = Array.new(3) { |i| producer.produce_async(topic: "sluice-spec-1p", payload: "unbounded #{i}") }

      expect_within(at_least: 1.2, guards: "a close cut short by max_wait_timeout (0.2 s), before message.timeout.ms (1.5 s)") do
        producer.close(timeout: nil)
      end

      expect(handles.map { |h| h.wait(raise_response_error: false).error&.code }.uniq).to eq([:msg_timed_out])
      expect(purged.events).to be_empty
    end
  end
end
