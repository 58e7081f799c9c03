# frozen_string_literal: true

# Consumer::Lanes: which message may start next under each ordering.
RSpec.describe Sluice::Consumer::Lanes do
  def message(offset, key: nil, partition: 0) = Sluice::Message.new("t", partition, offset, key, "m#{offset}", 0, nil)

  def start_all(lanes) = Array.new(4) { lanes.start }.compact

  it "refuses an unknown ordering" do
    expect { described_class.new(:fifo) }.to raise_error(ArgumentError, /ordering is one of :key, :partition, :none/)
  end

  describe ":key" do
    subject(:lanes) { described_class.new(:key) }

    it "starts different keys side by side, and a key's next message only once the one before finished" do
      a0 = message(0, key: "a")
      a1 = message(1, key: "a")
      b0 = message(2, key: "b")
      [a0, a1, b0].each { |m| lanes.add(m) }
      expect(start_all(lanes)).to eq([a0, b0])
      lanes.finished(b0)
      expect(lanes.start).to be_nil
      lanes.finished(a0)
      expect(lanes.start).to eq(a1)
    end

    it "orders keyless messages within their partition, apart from keyed ones" do
      n0 = message(0)
      n1 = message(1)
      k0 = message(2, key: "k")
      [n0, n1, k0].each { |m| lanes.add(m) }
      expect(start_all(lanes)).to eq([n0, k0])
      lanes.finished(n0)
      expect(lanes.start).to eq(n1)
    end

    it "keeps the same key on two partitions apart" do
      p0 = message(0, key: "a", partition: 0)
      p1 = message(0, key: "a", partition: 1)
      [p0, p1].each { |m| lanes.add(m) }
      expect(start_all(lanes)).to eq([p0, p1])
    end
  end

  describe ":partition" do
    subject(:lanes) { described_class.new(:partition) }

    it "starts one message per partition at a time, whatever the keys" do
      a = message(0, key: "a")
      b = message(1, key: "b")
      other = message(0, partition: 1)
      [a, b, other].each { |m| lanes.add(m) }
      expect(start_all(lanes)).to eq([a, other])
      lanes.finished(a)
      expect(lanes.start).to eq(b)
    end
  end

  describe ":none" do
    subject(:lanes) { described_class.new(:none) }

    it "starts every message as soon as asked, in the order added" do
      messages = Array.new(3) { |i| message(i, key: "a") }
      messages.each { |m| lanes.add(m) }
      expect(start_all(lanes)).to eq(messages)
    end
  end

  it "tells a partition's lowest waiting offset across its lanes (what a block may not store past)" do
    lanes = described_class.new(:key)
    [message(5, key: "a"), message(3, key: "b"), message(4, key: "b"), message(1, key: "c", partition: 1)].each { |m| lanes.add(m) }
    lanes.start # a lane's first message runs: no longer waiting
    expect([lanes.lowest_waiting("t", 0), lanes.lowest_waiting("t", 1), lanes.lowest_waiting("t", 2)]).to eq([3, 1, nil])
  end

  it "drops what waits on revoked partitions, and nothing that runs" do
    lanes = described_class.new(:partition)
    running = message(0)
    waiting = message(1)
    kept = message(0, partition: 1)
    [running, waiting, kept].each { |m| lanes.add(m) }
    expect(lanes.start).to eq(running)
    expect(lanes.drop([["t", 0]])).to eq([waiting])
    expect(lanes.waiting).to eq(1)
    lanes.finished(running)
    expect(lanes.start).to eq(kept)
    expect(lanes.start).to be_nil
  end
end
