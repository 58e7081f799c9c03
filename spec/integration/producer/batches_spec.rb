# frozen_string_literal: true

# produce_many_*: the whole batch in one native call, validated first, with a
# full queue waited out mid-batch and partition_key resolved up front.
RSpec.describe "Native batches (#{TestKafka::MODE} mode)", :kafka do
  it "enqueues a batch in order and returns a handle per message" do
    producer = build_producer
    batch = Array.new(1_000) { |i| { topic: "sluice-spec-many", payload: "m#{i}", label: i } }
    reports = producer.produce_many_sync(batch)
    expect(reports.map(&:label)).to eq((0...1_000).to_a)
    offsets = reports.map(&:offset)
    expect(offsets).to eq(offsets.sort)
    expect(offsets.last - offsets.first).to eq(999)
  end

  it "resolves partition_key with the partitioner for every message that has one" do
    producer = build_producer
    batch = Array.new(6) { |i| { topic: "sluice-spec-3p", payload: "p#{i}", partition_key: "same-key" } } +
            [{ topic: "sluice-spec-3p", payload: "explicit", partition: 2 }]
    reports = producer.produce_many_sync(batch)
    expect(reports.first(6).map(&:partition).uniq.size).to eq(1)
    expect(reports.last.partition).to eq(2)
  end

  it "waits for room when the local queue fills mid-batch, then goes on from where it stopped" do
    producer = build_producer(kafka: { "queue.buffering.max.messages": 10 }, wait_backoff_on_queue_full: 5)
    batch = Array.new(100) { |i| { topic: "sluice-spec-many", payload: "q#{i}", label: i } }
    reports = producer.produce_many_sync(batch)
    expect(reports.map(&:label)).to eq((0...100).to_a)
    expect(reports).to all(be_success)
  end

  it "refuses the whole batch when one message is invalid, enqueuing nothing" do
    producer = build_producer
    batch = [{ topic: "sluice-spec-many", payload: "ok" }] * 5 + [{ topic: "sluice-spec-many", payload: :not_a_string }]
    expect { producer.produce_many_async(batch) }.to raise_error(Sluice::Errors::MessageInvalidError, /payload/)
    expect(producer.outstanding).to eq(0)
  end

  it "costs less per message than produce_async one by one", timeout: 120 do
    producer = build_producer
    batch = Array.new(1_000) { { topic: "sluice-spec-bench", payload: "x" * 100 } }
    clock = -> { Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) }
    cpu = lambda do |&block|
      started = clock.call
      block.call
      clock.call - started
    end
    producer.produce_many_sync(batch) # warm up topic handle and connection
    many = Array.new(5) { cpu.call { producer.produce_many_async(batch) } }.min
    producer.flush
    single = Array.new(5) { cpu.call { batch.each { |m| producer.produce_async(m) } } }.min
    producer.flush
    expect(many).to be < single
  end
end
