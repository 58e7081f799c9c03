# frozen_string_literal: true

RSpec.describe "Delivery failures", :kafka do
  let(:producer) { build_producer }

  describe "a message over the producer's message.max.bytes" do
    let(:producer) { build_producer(kafka: { "message.max.bytes": 10_000 }) }

    it "is refused at once with ProduceError :msg_size_too_large, and nothing stays outstanding" do
      expect { producer.produce_async(topic: "sluice-spec-1p", payload: "x" * 20_000) }.to raise_error(Sluice::Errors::ProduceError) do |error|
        expect(error.code).to eq(:msg_size_too_large)
        expect(error.kafka_error).to be_a(Sluice::KafkaError)
        expect(error.kafka_error.number).to eq(10)
        expect(error.retryable?).to be(false)
        expect(error.fatal?).to be(false)
        expect(error.message).to match(/delivery failed: .*\(msg_size_too_large\)/)
      end
      expect(producer.outstanding).to eq(0)
    end

    it "is refused by produce_sync the same way, and the producer goes on" do
      expect { producer.produce_sync(topic: "sluice-spec-1p", payload: "x" * 20_000) }
        .to raise_error(Sluice::Errors::ProduceError) { |error| expect(error.code).to eq(:msg_size_too_large) }

      report = producer.produce_sync(topic: "sluice-spec-1p", payload: "x" * 5_000)
      expect(report.error).to be_nil
      expect(consume_reports([report]).first[:payload].bytesize).to eq(5_000)
    end

    it "fails the batch of produce_many_async at that message" do
      batch = [{ topic: "sluice-spec-1p", payload: "small" }, { topic: "sluice-spec-1p", payload: "x" * 20_000 }]
      expect { producer.produce_many_async(batch) }
        .to raise_error(Sluice::Errors::ProduceError) { |error| expect(error.code).to eq(:msg_size_too_large) }
    end
  end

  describe "a message the broker refuses (topic max.message.bytes=2000)" do
    let(:topic) { "sluice-spec-small" }
    let(:producer) { build_producer(kafka: { "message.max.bytes": 1_000_000 }) }

    it "fails in the delivery report: #wait raises ProduceError :msg_size_too_large carrying the report" do
      handle = producer.produce_async(topic: topic, payload: "x" * 5_000, label: :too_big)

      expect { handle.wait }.to raise_error(Sluice::Errors::ProduceError) do |error|
        expect(error.code).to eq(:msg_size_too_large)
        expect(error.delivery_report).to be(handle.report)
        expect(error.delivery_report).to have_attributes(topic: topic, label: :too_big)
      end
      expect(handle).not_to be_pending
    end

    it "returns the failed report from wait(raise_response_error: false)" do
      handle = producer.produce_async(topic: topic, payload: "x" * 5_000)
      report = handle.wait(raise_response_error: false)

      expect(report).not_to be_success
      expect(report.error).to be_a(Sluice::KafkaError)
      expect(report.error.code).to eq(:msg_size_too_large)
      expect(report.topic).to eq(topic)
    end

    it "raises from produce_sync" do
      expect { producer.produce_sync(topic: topic, payload: "x" * 5_000) }
        .to raise_error(Sluice::Errors::ProduceError) { |error| expect(error.code).to eq(:msg_size_too_large) }
    end

    it "instruments error.occurred of type librdkafka.dispatch_error, and no message.acknowledged" do
      events = record_events(producer.monitor, "error.occurred", "message.acknowledged")
      handle = producer.produce_async(topic: topic, payload: "x" * 5_000, label: 99)
      handle.wait(raise_response_error: false)

      event = events.await { |e| e.id == "error.occurred" }
      expect(event.to_h).to include(producer_id: producer.id, type: "librdkafka.dispatch_error", topic: topic, label: 99)
      expect(event[:error]).to be_a(Sluice::Errors::ProduceError)
      expect(event[:error].code).to eq(:msg_size_too_large)
      expect(event[:error].delivery_report).to be(handle.report)
      expect(events.events.map(&:id)).not_to include("message.acknowledged")
    end

    it "leaves the producer working for later messages that fit" do
      # (sent after the failure: batched together with the big one, the broker would refuse the whole batch)
      big = producer.produce_async(topic: topic, payload: "x" * 5_000)
      expect(big.wait(raise_response_error: false).error.code).to eq(:msg_size_too_large)

      small = producer.produce_sync(topic: topic, payload: "fits")
      expect(small.error).to be_nil
      expect(consume_reports([small]).first[:payload]).to eq("fits")
    end
  end

  describe "waiting on a producer that cannot reach a broker" do
    let(:producer) { build_unreachable_producer }

    after { producer.close! }

    it "raises WaitTimeoutError after max_wait_timeout, keeps the handle pending, and close! resolves it with an error" do
      handle = producer.produce_async(topic: "sluice-spec-1p", payload: "stuck")

      expect_within(at_least: 0.2, guards: "giving up before max_wait_timeout (200 ms)") do
        expect { handle.wait(max_wait_timeout: 200) }.to raise_error(Sluice::Errors::WaitTimeoutError) do |error|
          expect(error.handle).to be(handle)
          expect(error.message).to match(/200 ms/)
        end
      end
      expect(handle).to be_pending
      expect(producer.outstanding).to eq(1)

      # still pending: waiting again times out again
      expect { handle.wait(max_wait_timeout: 50) }.to raise_error(Sluice::Errors::WaitTimeoutError)

      producer.close!
      expect(handle).not_to be_pending
      report = handle.wait(raise_response_error: false)
      expect(report.error).to be_a(Sluice::KafkaError)
      expect(report.error.code).to eq(:purge_queue)
      expect { handle.wait }.to raise_error(Sluice::Errors::ProduceError) { |error| expect(error.code).to eq(:purge_queue) }
      expect(producer.outstanding).to eq(0)
    end

    it "makes produce_sync raise WaitTimeoutError after the configured max_wait_timeout" do
      impatient = build_unreachable_producer(max_wait_timeout: 150)
      expect { impatient.produce_sync(topic: "sluice-spec-1p", payload: "x") }
        .to raise_error(Sluice::Errors::WaitTimeoutError) { |error| expect(error.handle).to be_pending }
      impatient.close!
    end

    it "close! resolves every queued handle with :purge_queue and reports each as message.purged" do
      events = record_events(producer.monitor, "error.occurred", "message.purged")
      handles = Array.new(100) { |i| producer.produce_async(topic: "sluice-spec-1p", payload: "p#{i}", label: i) }
      expect(producer.outstanding).to eq(100)

      producer.close!

      expect(handles.count(&:pending?)).to eq(0)
      reports = handles.map { |h| h.wait(raise_response_error: false) }
      expect(reports.map { |r| r.error&.code }.uniq).to eq([:purge_queue])
      expect(reports.map(&:label)).to eq((0...100).to_a)
      expect(reports.map(&:offset).uniq).to eq([-1001]) # librdkafka's RD_KAFKA_OFFSET_INVALID
      expect(producer.outstanding).to eq(0)
      expect(producer).to be_closed

      purged = events.events.select { |e| e.id == "message.purged" }
      expect(purged.map { |e| e[:label] }).to match_array((0...100).to_a)
      expect(purged.map { |e| e[:error].code }.uniq).to eq([:purge_queue])
      expect(purged.map { |e| [e[:producer_id], e[:topic]] }.uniq).to eq([[producer.id, "sluice-spec-1p"]])
      expect(events.events.select { |e| e[:type] == "librdkafka.dispatch_error" }).to be_empty # a purge is no delivery error
    end

    it "close(timeout:) gives up after the timeout and resolves the handles with :purge_queue" do
      handles = Array.new(10) { |i| producer.produce_async(topic: "sluice-spec-1p", payload: "t#{i}") }

      expect_within(5, at_least: 0.3, guards: "giving up before the 300 ms timeout, or waiting for undeliverable messages past it") do
        producer.close(timeout: 300)
      end

      expect(producer).to be_closed
      expect(handles.map { |h| h.wait(raise_response_error: false).error&.code }.uniq).to eq([:purge_queue])
    end

    it "wakes threads blocked in #wait when close! purges their message" do
      handle = producer.produce_async(topic: "sluice-spec-1p", payload: "waited on")
      waiting = Queue.new
      waiters = Array.new(3) do
        Thread.new do
          waiting << :waiting
          handle.wait(max_wait_timeout: 30_000, raise_response_error: false)
        end
      end
      3.times { pop_within(waiting) }

      reports = expect_within(10, guards: "the waiters' own 30 s max_wait_timeout") do
        producer.close!
        waiters.map(&:value)
      end

      expect(reports.map { |r| r.error.code }).to eq(%i[purge_queue] * 3)
      expect(reports.uniq.size).to eq(1)
    end

    it "refuses a partition_key message when partitions cannot be looked up, after max_wait_timeout, enqueueing nothing" do
      impatient = build_unreachable_producer(max_wait_timeout: 200)
      expect { impatient.produce_async(topic: "sluice-spec-3p", payload: "x", partition_key: "k") }
        .to raise_error(Sluice::Errors::ProduceError) { |error| expect(%i[transport all_brokers_down timed_out]).to include(error.code) }
      expect(impatient.outstanding).to eq(0)
      impatient.close!
    end

    it "flush(timeout_ms) returns false while messages cannot be delivered" do
      producer.produce_async(topic: "sluice-spec-1p", payload: "x")
      expect(producer.flush(100)).to be(false)
      expect(producer.outstanding).to eq(1)
    end
  end

  describe "a full local queue" do
    it "raises ProduceError :queue_full at once when wait_on_queue_full is false" do
      full = build_unreachable_producer(kafka: { "queue.buffering.max.messages": 1 }, wait_on_queue_full: false)
      full.produce_async(topic: "sluice-spec-1p", payload: "first")

      expect { full.produce_async(topic: "sluice-spec-1p", payload: "second") }.to raise_error(Sluice::Errors::ProduceError) do |error|
        expect(error.code).to eq(:queue_full)
        expect(error.retryable?).to be(true)
      end
      expect(full.outstanding).to eq(1)
      full.close!
    end

    it "waits up to wait_timeout_on_queue_full for room, then raises ProduceError :queue_full" do
      full = build_unreachable_producer(kafka: { "queue.buffering.max.messages": 1 }, wait_timeout_on_queue_full: 300,
                                        wait_backoff_on_queue_full: 20)
      full.produce_async(topic: "sluice-spec-1p", payload: "first")

      expect_within(at_least: 0.3, guards: "raising before wait_timeout_on_queue_full (300 ms)") do
        expect { full.produce_async(topic: "sluice-spec-1p", payload: "second") }
          .to raise_error(Sluice::Errors::ProduceError) { |error| expect(error.code).to eq(:queue_full) }
      end
      expect(full.outstanding).to eq(1)
      full.close!
    end

    it "waits for room and succeeds once deliveries free the queue" do
      tight = build_producer(kafka: { "queue.buffering.max.messages": 5 }, wait_backoff_on_queue_full: 5)
      handles = Array.new(200) { |i| tight.produce_async(topic: "sluice-spec-many", payload: "q#{i}") }
      reports = handles.map(&:wait)

      expect(reports.map(&:error)).to all(be_nil)
      expect(reports.map(&:offset).uniq.size).to eq(200)
      expect(reports.map(&:offset)).to eq(reports.map(&:offset).sort) # in produce order
    end
  end
end
