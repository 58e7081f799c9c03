# frozen_string_literal: true

require_relative "../spec_helper"

# Sluice::Message as the native consumer builds it (a Struct whose field
# order ext/sluice/consume.c fills by index), without a broker.
RSpec.describe Sluice::Message do
  let(:message) do
    described_class.new("orders", 2, 41, "k".b, "payload".b, 1_700_000_000_123, ["trace", "a".b, "trace", "b".b, "empty", nil])
  end

  it "keeps the field order the native consumer fills" do
    expect(described_class.members).to eq(%i[topic partition offset key payload timestamp_ms raw_headers])
  end

  it "reads its fields and has no public writers" do
    expect([message.topic, message.partition, message.offset, message.key, message.payload]).to eq(["orders", 2, 41, "k", "payload"])
    expect(message).not_to respond_to(:topic=)
    expect(message).not_to respond_to(:[]=)
    expect(message).not_to respond_to(:raw_headers)
  end

  it "builds headers from the flat list: repeated names in order, a header without value as nil" do
    expect(message.headers).to eq("trace" => %w[a b], "empty" => nil)
    expect(message.headers).to be_frozen
    expect(message.header_pairs).to eq([%w[trace a], %w[trace b], ["empty", nil]])
  end

  it "has no headers, key or timestamp when the native side set none" do
    bare = described_class.new("orders", 0, 7, nil, nil)
    expect(bare.headers).to eq({})
    expect(bare.timestamp).to be_nil
    expect(bare).to be_tombstone
    expect(bare.inspect).to eq("#<Sluice::Message orders/0@7 tombstone>")
  end

  it "gives the timestamp as a Time to the millisecond" do
    expect(message.timestamp).to eq(Time.at(1_700_000_000, 123, :millisecond))
  end

  it "describes itself and converts to a Hash with parsed headers" do
    expect(message.inspect).to eq(%(#<Sluice::Message orders/2@41 key="k" 7 bytes>))
    expect(message.to_h).to include(topic: "orders", partition: 2, offset: 41, headers: { "trace" => %w[a b], "empty" => nil })
  end

  it "equals a message with the same fields" do
    copy = described_class.new("orders", 2, 41, "k".b, "payload".b, 1_700_000_000_123, ["trace", "a".b, "trace", "b".b, "empty", nil])
    expect(message).to eq(copy)
    expect(message).not_to eq(described_class.new("orders", 2, 42))
  end

  it "matches hash patterns" do
    matched = (message in { topic: "orders", partition: 2, offset: 41 })
    expect(matched).to be(true)
  end

  it "is a message, not a collection of its fields" do
    expect(Array(message)).to eq([message])
    expect([message].flatten).to eq([message])
    %i[each size length to_a first map include? values deconstruct []].each do |name|
      expect(message).not_to respond_to(name)
    end
  end

  it "never shows its payload in pp (IRB, consoles, error trackers)" do
    secret = described_class.new("orders", 2, 41, nil, "s3cr3t" * 1000)
    expect { pp secret }.to output("#<Sluice::Message orders/2@41 6000 bytes>\n").to_stdout
    expect(secret.inspect).not_to include("s3cr3t")
  end
end
