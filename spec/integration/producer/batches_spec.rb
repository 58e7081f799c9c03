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

  # Why produce_many_async is cheaper (bin/bench's produce_many_async column
  # measures by how much): one native call, one GVL-holding loop, for the
  # whole batch, instead of a Ruby call and a handle dispatch per message.
  it "enqueues the whole batch in one native call" do
    producer = build_producer
    client = producer.client
    allow(client).to receive(:produce_many).and_call_original
    allow(client).to receive(:produce).and_call_original
    handles = producer.produce_many_async(Array.new(1_000) { { topic: "sluice-spec-many", payload: "x" } })
    expect(client).to have_received(:produce_many).once
    expect(client).not_to have_received(:produce)
    expect(handles.map { |handle| handle.wait.success? }.uniq).to eq([true])
  end
end
