# frozen_string_literal: true

# buffer / buffer_many / flush_sync / flush_async: messages held in the
# producer until a flush, safe under concurrent buffering and flushing, and a
# failed flush keeping what never reached librdkafka.
RSpec.describe "Buffering (#{TestKafka::MODE} mode)", :kafka do
  let(:producer) { build_producer }
  let(:topic) { "sluice-spec-1p" }

  it "buffers messages until flush_sync sends them and returns their reports" do
    expect(producer.buffer(topic: topic, payload: "one")).to eq(1)
    expect(producer.buffer_many([{ topic: topic, payload: "two" }, { topic: topic, payload: "three" }])).to eq(3)
    expect(producer.outstanding).to eq(0)
    expect(producer.buffered.map { |m| m[:payload] }).to eq(%w[one two three])

    reports = producer.flush_sync
    expect(reports).to all(be_a(Sluice::Delivery::Report).and(be_success))
    expect(consume_reports(reports).map { |m| m[:payload] }).to eq(%w[one two three])
    expect(producer.buffered).to be_empty
    expect(producer.flush_sync).to eq([])
  end

  it "flush_async returns the delivery handles" do
    producer.buffer(topic: topic, payload: "async")
    handles = producer.flush_async
    expect(handles.size).to eq(1)
    expect(handles.first.wait.offset).to be >= 0
  end

  it "validates when buffering: an invalid message is refused and buffer_many takes all or nothing" do
    expect { producer.buffer(topic: topic, payload: 1) }.to raise_error(Sluice::Errors::MessageInvalidError)
    expect { producer.buffer_many([{ topic: topic, payload: "ok" }, { payload: "no topic" }]) }
      .to raise_error(Sluice::Errors::MessageInvalidError)
    expect { producer.buffer_many({ topic: topic }) }.to raise_error(Sluice::Errors::MessageInvalidError, /Array/)
    expect(producer.buffered).to be_empty
  end

  it "emits message.buffered, messages.buffered and buffer.flushed_sync/async" do
    events = record_events(producer.monitor, "message.buffered", "messages.buffered", "buffer.flushed_sync", "buffer.flushed_async")
    producer.buffer(topic: topic, payload: "a")
    producer.buffer_many([{ topic: topic, payload: "b" }, { topic: topic, payload: "c" }])
    producer.flush_sync
    producer.buffer(topic: topic, payload: "d")
    producer.flush_async.each(&:wait)
    expect(events.events.map(&:id)).to eq(%w[message.buffered messages.buffered buffer.flushed_sync message.buffered buffer.flushed_async])
    expect(events.events.map { |e| (e[:messages] || [e[:message]]).size }).to eq([1, 2, 3, 1, 1])
  end

  it "refuses to buffer once closed" do
    producer.close
    expect { producer.buffer(topic: topic, payload: "late") }.to raise_error(Sluice::Errors::ProducerClosedError)
  end

  it "sends every message buffered by concurrent threads exactly once while other threads flush", timeout: 120 do
    writers = 4
    per_writer = 500
    done = false
    batches = Queue.new # one flush's reports each, in the order it sent them
    flushers = Array.new(2) do |n|
      Thread.new do
        until done
          batch = n.zero? ? producer.flush_sync : producer.flush_async.map(&:wait)
          batches << batch unless batch.empty?
          Thread.pass
        end
      end
    end
    threads = Array.new(writers) do |w|
      Thread.new do
        per_writer.times do |i|
          if i.even?
            producer.buffer(topic: topic, payload: "w#{w}-#{i}", label: [w, i])
          else
            producer.buffer_many([{ topic: topic, payload: "w#{w}-#{i}", label: [w, i] }])
          end
        end
      end
    end
    threads.each(&:join)
    done = true
    flushers.each(&:join)
    batches << producer.flush_sync

    flushed = Array.new(batches.size) { batches.pop.map(&:label) }
    labels = flushed.flatten(1)
    expect(labels.size).to eq(writers * per_writer)
    expect(labels.uniq.size).to eq(writers * per_writer)
    # Within a flush, one writer's messages keep their order. (Two flushes
    # running at once may reach Kafka in either order: README, Buffering.)
    flushed.each do |batch|
      batch.group_by(&:first).each_value { |mine| expect(mine.map(&:last)).to eq(mine.map(&:last).sort) }
    end
    expect(producer.buffered).to be_empty
  end

  describe "a flush that fails part-way" do
    # 5 messages fit in librdkafka's queue and nothing empties it (unreachable broker).
    let(:producer) { build_unreachable_producer(kafka: { "queue.buffering.max.messages": 5 }, wait_on_queue_full: false) }

    it "keeps the messages that never reached librdkafka, in order, in front of those buffered since" do
      producer.buffer_many(Array.new(8) { |i| { topic: topic, payload: "m#{i}", label: i } })
      expect { producer.flush_async }.to raise_error(Sluice::Errors::ProduceManyError) do |error|
        expect(error.code).to eq(:queue_full)
        expect(error.dispatched.map(&:label)).to eq([0, 1, 2, 3, 4])
      end
      producer.buffer(topic: topic, payload: "later", label: 8)
      expect(producer.buffered.map { |m| m[:label] }).to eq([5, 6, 7, 8])

      expect { producer.flush_sync }.to raise_error(Sluice::Errors::ProduceManyError) { |e| expect(e.dispatched).to be_empty }
      expect(producer.buffered.map { |m| m[:label] }).to eq([5, 6, 7, 8])
      producer.close!
    end

    it "reports what close could not deliver as purged, also what was still buffered; nothing stays behind" do
      purged = record_events(producer.monitor, "message.purged")
      producer.buffer(topic: topic, payload: "buffered", label: :buffered)
      producer.produce_async(topic: topic, payload: "queued", label: :queued)
      producer.close!
      expect(purged.events.map { |e| e[:label] }).to contain_exactly(:buffered, :queued)
      expect(producer.buffered).to be_empty
      expect { producer.flush_sync }.to raise_error(Sluice::Errors::ProducerClosedError)
    end
  end

  # A message leaves the buffer once librdkafka took it: a flush that raised
  # after that must not leave it there to be sent again.
  describe "a flush whose wait fails" do
    def payloads_from(offset, last)
      consume_until(topic, 0, offset) { |m| m[:payload] == last }.map { |m| m[:payload] }
    end

    it "WaitTimeoutError: the messages were handed over; the next flush does not send them again" do
      id = SecureRandom.hex(4)
      start = producer.produce_sync(topic: topic, payload: "start-#{id}").offset
      lingering = build_producer(kafka: { "linger.ms": 1_500 }, max_wait_timeout: 100)
      lingering.buffer_many(Array.new(3) { |i| { topic: topic, payload: "wait-#{id}-#{i}" } })
      expect { lingering.flush_sync }.to raise_error(Sluice::Errors::WaitTimeoutError)
      expect(lingering.buffered).to be_empty
      expect(lingering.flush_sync).to eq([])
      expect(lingering.flush(10_000)).to be(true)
      producer.produce_sync(topic: topic, payload: "end-#{id}")

      expect(payloads_from(start, "end-#{id}").grep(/wait-#{id}/)).to eq(Array.new(3) { |i| "wait-#{id}-#{i}" })
    end

    it "ProduceError for one refused message: the good ones are sent once, later flushes are not wedged" do
      small = "sluice-spec-small" # max.message.bytes 2000 on the broker
      one_per_request = build_producer(kafka: { "batch.num.messages": 1 })
      id = SecureRandom.hex(4)
      start = one_per_request.produce_sync(topic: small, payload: "start-#{id}").offset
      one_per_request.buffer_many([{ topic: small, payload: "good-#{id}-0" }, { topic: small, payload: "x" * 3_000 },
                                   { topic: small, payload: "good-#{id}-1" }])
      expect { one_per_request.flush_sync }.to raise_error(Sluice::Errors::ProduceError) { |e| expect(e.code).to eq(:msg_size_too_large) }
      expect(one_per_request.buffered).to be_empty
      one_per_request.buffer(topic: small, payload: "good-#{id}-2")
      expect(one_per_request.flush_sync.map(&:error)).to eq([nil])

      read = consume_until(small, 0, start) { |m| m[:payload] == "good-#{id}-2" }.map { |m| m[:payload] }
      expect(read.grep(/good-#{id}/)).to eq(%W[good-#{id}-0 good-#{id}-1 good-#{id}-2])
    end
  end

  it "close sends what is still buffered" do
    id = SecureRandom.hex(4)
    start = producer.produce_sync(topic: topic, payload: "start-#{id}").offset
    closing = build_producer
    closing.buffer_many(Array.new(3) { |i| { topic: topic, payload: "close-#{id}-#{i}" } })
    closing.close
    producer.produce_sync(topic: topic, payload: "end-#{id}")
    read = consume_until(topic, 0, start) { |m| m[:payload] == "end-#{id}" }.map { |m| m[:payload] }
    expect(read.grep(/close-#{id}/)).to eq(Array.new(3) { |i| "close-#{id}-#{i}" })
  end
end
