# frozen_string_literal: true

# tombstone_* : nil-payload messages with a required key and partition.
RSpec.describe "Tombstones (#{TestKafka::MODE} mode)", :kafka do
  let(:producer) { build_producer }
  let(:topic) { "sluice-spec-3p" }

  it "tombstone_sync writes a nil payload under the key, to the partition given" do
    report = producer.tombstone_sync(topic: topic, key: "gone", partition: 2)
    expect(report.partition).to eq(2)
    message = consume_reports([report]).first
    expect(message).to include(key: "gone", payload: nil, partition: 2)
  end

  it "tombstone_async returns a handle; headers and labels pass through" do
    handle = producer.tombstone_async(topic: topic, key: "k", partition: 1, headers: { "why" => "deleted" }, label: :t)
    report = handle.wait
    expect(report.label).to eq(:t)
    expect(consume_reports([report]).first).to include(payload: nil, headers: [%w[why deleted]])
  end

  it "tombstone_many_sync and tombstone_many_async produce a batch of tombstones" do
    batch = [{ topic: topic, key: "a", partition: 0 }, { topic: topic, key: "b", partition: 1 }]
    reports = producer.tombstone_many_sync(batch) + producer.tombstone_many_async(batch).map(&:wait)
    expect(reports.map(&:partition)).to eq([0, 1, 0, 1])
    expect(consume_reports(reports).map { |m| [m[:key], m[:payload], m[:partition]] })
      .to contain_exactly(["a", nil, 0], ["b", nil, 1], ["a", nil, 0], ["b", nil, 1])
  end

  it "requires a key and a partition, and refuses a payload" do
    expect { producer.tombstone_sync(topic: topic, partition: 0) }.to raise_error(Sluice::Errors::MessageInvalidError, /:key/)
    expect { producer.tombstone_async(topic: topic, key: "k") }.to raise_error(Sluice::Errors::MessageInvalidError, /:partition/)
    expect { producer.tombstone_async(topic: topic, key: "k", partition: -1) }.to raise_error(Sluice::Errors::MessageInvalidError)
    expect { producer.tombstone_sync(topic: topic, key: "k", partition: 0, payload: "x") }
      .to raise_error(Sluice::Errors::MessageInvalidError, /no payload/)
    expect { producer.tombstone_many_async([{ topic: topic, key: "k", partition: 0 }, { topic: topic, key: "k" }]) }
      .to raise_error(Sluice::Errors::MessageInvalidError)
    expect(producer.outstanding).to eq(0)
  end
end
