# frozen_string_literal: true

# What the consumer's settings hand librdkafka: sluice's defaults, and the
# application's own value wherever it gave one.
RSpec.describe Sluice::Consumer::Config do
  def pairs(kafka = {})
    config = described_class.new
    config.kafka = { "bootstrap.servers": "127.0.0.1:1", "group.id": "g" }.merge(kafka)
    config.validate!.freeze.kafka_pairs.to_h
  end

  it "leaves storing offsets to sluice unless told otherwise" do
    expect(pairs["enable.auto.offset.store"]).to eq("false")
    expect(pairs("enable.auto.offset.store": true)["enable.auto.offset.store"]).to eq("true")
  end

  it "prefetches without pausing a second whenever the queue was full (fetch.queue.backoff.ms 10 from librdkafka 2.2)" do
    allow(Sluice).to receive(:librdkafka_version).and_return("2.14.2")
    expect(pairs["fetch.queue.backoff.ms"]).to eq("10")
    expect(pairs("fetch.queue.backoff.ms": 500)["fetch.queue.backoff.ms"]).to eq("500") # the application's wins
    expect(pairs).not_to include("queued.min.messages", "queued.max.messages.kbytes") # librdkafka's bounds stay
  end

  it "sets nothing librdkafka older than 2.2 does not know" do
    allow(Sluice).to receive(:librdkafka_version).and_return("2.0.2")
    expect(pairs).not_to include("fetch.queue.backoff.ms")
  end
end
