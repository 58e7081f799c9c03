# frozen_string_literal: true

require "json"

# sluice produce and sluice tail against the broker, run as a shell runs them.
RSpec.describe "sluice produce and tail", :kafka, timeout: 120 do
  include SluiceCommand

  before(:all) { @topics = SluiceCommand.create_topics({ lines: 1, keys: 1, json: 1, tail: 1, spread: 3, empty: 2, failing: 1, bytes: 1 }) }
  after(:all) { SluiceCommand.delete_topics(@topics.values) if @topics }

  def topic(name) = @topics.fetch(name)

  it "produces stdin's lines and tails them back from the beginning, exactly" do
    lines = Array.new(1_500) { |i| "line #{i} #{"x" * (i % 7)}" }
    produced = sluice("produce", topic(:lines), "--progress", "500", stdin: "#{lines.join("\n")}\n")
    expect(produced.code).to eq(0), produced.stderr
    expect(produced.stdout).to eq("")
    expect(produced.stderr.lines.grep(/\d+ sent, \d+ delivered/).size).to eq(3) # every 500 of 1,500
    expect(produced.stderr).to include("1500 of 1500 message(s) delivered to #{topic(:lines)}, 0 failed")

    tailed = sluice("tail", topic(:lines), "-o", "beginning", "-c", "1500", "-e")
    expect(tailed.code).to eq(0), tailed.stderr
    expect(tailed.stdout).to eq(lines.map { |line| "#{line}\n" }.join)
    expect(consume(topic(:lines), 0, 0, 1).first[:payload]).to eq("line 0 ") # one message a line, no key
  end

  # Issue 42: "\r" was chomped with the "\n", and an empty line became an empty message (kcat skips it).
  it "sends a line's bytes as read, the \\r of a CRLF line kept, and skips empty lines as kcat does" do
    produced = sluice("produce", topic(:bytes), "-q", stdin: "crlf\r\n\n\xFFbinary\n\r\nlast".b)
    expect(produced.code).to eq(0), produced.stderr
    expect(produced.stderr).to include("4 of 4 message(s) delivered")
    expect(consume(topic(:bytes), 0, 0, 4).map { |m| m[:payload].b }).to eq(["crlf\r", "\xFFbinary".b, "\r", "last"])
  end

  it "stops after -c COUNT messages and starts where -o says: an offset, -N from the end" do
    sluice("produce", topic(:tail), stdin: (0...10).map { |i| "m#{i}\n" }.join).then { |r| expect(r.code).to eq(0), r.stderr }

    expect(sluice("tail", topic(:tail), "-o", "beginning", "-c", "3").stdout).to eq("m0\nm1\nm2\n")
    expect(sluice("tail", topic(:tail), "-o", "7", "-e").stdout).to eq("m7\nm8\nm9\n")
    expect(sluice("tail", topic(:tail), "-o", "-2", "-e").stdout).to eq("m8\nm9\n")
    expect(sluice("tail", topic(:tail), "-o", "end", "-e").stdout).to eq("")
  end

  it "splits key from value with -K on produce, and prints them with -K on tail" do
    lines = Array.new(20) { |i| "key-#{i}\tvalue #{i}\twith a tab" }
    produced = sluice("produce", topic(:keys), "-K", "\t", "-H", "origin=cli", stdin: lines.join("\n"))
    expect(produced.code).to eq(0), produced.stderr

    stored = consume(topic(:keys), 0, 0, 20)
    expect(stored.map { |m| [m[:key], m[:payload], m[:headers]] })
      .to eq(Array.new(20) { |i| ["key-#{i}", "value #{i}\twith a tab", [%w[origin cli]]] })
    tailed = sluice("tail", topic(:keys), "-o", "beginning", "-e", "-K", "\t")
    expect(tailed.stdout.lines(chomp: true)).to eq(lines)
  end

  it "produces JSON lines with key, headers and partition, and tails them as JSON" do
    input = [{ key: "a", value: "first", headers: { "trace" => "t-1", "kind" => "order" } },
             { value: "no key" },
             { key: "gone", value: nil }, # a tombstone
             { key: "p2", value: "to partition 2", partition: 2 }]
    produced = sluice("produce", topic(:spread), "--json", stdin: input.map { |line| JSON.generate(line) }.join("\n"))
    expect(produced.code).to eq(0), produced.stderr

    tailed = sluice("tail", topic(:spread), "-o", "beginning", "-e", "-f", "json")
    expect(tailed.code).to eq(0), tailed.stderr
    records = tailed.stdout.lines.map { |line| JSON.parse(line) }
    expect(records.map { |r| r.slice("key", "value", "headers") }).to contain_exactly(
      { "key" => "a", "value" => "first", "headers" => { "trace" => "t-1", "kind" => "order" } },
      { "key" => nil, "value" => "no key", "headers" => {} },
      { "key" => "gone", "value" => nil, "headers" => {} },
      { "key" => "p2", "value" => "to partition 2", "headers" => {} }
    )
    expect(records).to all(include("topic" => topic(:spread), "offset" => Integer, "timestamp" => Integer))
    expect(records.find { |r| r["key"] == "p2" }["partition"]).to eq(2)
  end

  it "prints a value that is not UTF-8 as value_base64 in JSON" do
    build_producer.produce_sync(topic: topic(:json), payload: "\xFF\x00bytes".b, key: "bin")
    tailed = sluice("tail", topic(:json), "-o", "beginning", "-e", "-J")
    record = JSON.parse(tailed.stdout.lines.first)
    expect(record).not_to have_key("value")
    expect(record["value_base64"].unpack1("m0")).to eq("\xFF\x00bytes".b)
  end

  it "exits at the end of every partition with -e when there is nothing to read" do
    tailed = sluice("tail", topic(:empty), "-o", "beginning", "-e", timeout: 30)
    expect(tailed.code).to eq(0), tailed.stderr
    expect(tailed.stdout).to eq("")
  end

  it "exits 1 naming the failure when deliveries fail, and counts them" do
    produced = sluice("produce", topic(:failing), "-p", "5", "--timeout", "5", stdin: "a\nb\nc\n")
    expect(produced.code).to eq(1)
    expect(produced.stderr).to include("unknown_partition")
    expect(produced.stderr).to include("0 of 3 message(s) delivered to #{topic(:failing)}, 3 failed")
  end

  it "counts a JSON line it cannot read as failed, and delivers the others" do
    produced = sluice("produce", topic(:failing), "--json", stdin: %({"value":"ok"}\nnot json\n{"value":"ok too"}\n))
    expect(produced.code).to eq(1)
    expect(produced.stderr).to include("line 2: invalid JSON")
    expect(produced.stderr).to include("2 of 3 message(s) delivered")
  end
end
