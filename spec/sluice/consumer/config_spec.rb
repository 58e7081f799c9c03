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

  it "takes poll_store (poll's store: default) as true or false only, false unless set" do
    config = described_class.new
    expect(config.poll_store).to be(false)
    config.kafka = { "bootstrap.servers": "127.0.0.1:1", "group.id": "g" }
    config.poll_store = "yes"
    expect { config.validate! }.to raise_error(Sluice::Errors::ConfigurationInvalidError, /poll_store must be true or false, got "yes"/)
    config.poll_store = true
    expect(config.validate!.poll_store).to be(true)
  end

  it "heartbeats every second (a close during a rebalance waits for it to complete), unless told otherwise" do
    expect(pairs["heartbeat.interval.ms"]).to eq("1000")
    expect(pairs("heartbeat.interval.ms": 3000)["heartbeat.interval.ms"]).to eq("3000")
    expect(pairs("session.timeout.ms": 2000)).not_to include("heartbeat.interval.ms") # 1 s would be half the session
  end

  it "prefetches without pausing a second whenever the queue was full, into a smaller queue (from librdkafka 2.2)" do
    allow(Sluice).to receive(:librdkafka_version).and_return("2.14.2")
    expect(pairs).to include("fetch.queue.backoff.ms" => "10", "queued.min.messages" => "15000")
    expect(pairs).not_to include("queued.max.messages.kbytes") # librdkafka's 64 MB bound stays
  end

  it "lets the application's prefetch settings win" do
    allow(Sluice).to receive(:librdkafka_version).and_return("2.14.2")
    expect(pairs("queued.min.messages": 100_000)).to include("fetch.queue.backoff.ms" => "10", "queued.min.messages" => "100000")
    # a backoff of its own (say the default second) needs the queue it comes with
    expect(pairs("fetch.queue.backoff.ms": 1000)).to include("fetch.queue.backoff.ms" => "1000")
    expect(pairs("fetch.queue.backoff.ms": 1000)).not_to include("queued.min.messages")
  end

  # KIP-848 (issue 40): librdkafka refuses heartbeat.interval.ms under
  # "group.protocol": "consumer", so sluice's default made that protocol
  # impossible to use.
  it "sets no heartbeat under KIP-848's consumer protocol, and names the classic settings it refuses with where they live" do
    expect(pairs("group.protocol": "consumer")).not_to include("heartbeat.interval.ms")
    expect(pairs("group.protocol": "classic")["heartbeat.interval.ms"]).to eq("1000")
    {
      "heartbeat.interval.ms": [3000, /group.consumer.heartbeat.interval.ms/],
      "session.timeout.ms": [45_000, /group.consumer.session.timeout.ms/],
      "partition.assignment.strategy": ["range", /group.remote.assignor/],
      "group.protocol.type": ["consumer", /no protocol type/]
    }.each do |name, (value, instead)|
      expect { pairs("group.protocol": "consumer", name => value) }
        .to raise_error(Sluice::Errors::ConfigurationInvalidError,
                        /\A#{Regexp.escape(name.to_s)} is a setting of the classic group protocol.*#{instead.source}/)
    end
  end

  # librdkafka accepts what sluice hands it, however group.protocol is spelt.
  { "at its defaults (librdkafka accepts what sluice hands it)" => "consumer",
    "when group.protocol is spelt in capitals" => "CONSUMER" }.each do |how, protocol|
    it "builds a KIP-848 consumer #{how}",
       skip: (Gem::Version.new(Sluice.librdkafka_version) < Gem::Version.new("2.4") &&
              "librdkafka #{Sluice.librdkafka_version} has no group.protocol") do
      consumer = Sluice::Consumer.new do |config|
        config.kafka = { "bootstrap.servers": "127.0.0.1:1", "group.id": "g", "group.protocol": protocol }
        config.logger = Logger.new(nil)
      end
      expect(consumer).not_to be_closed
    ensure
      consumer&.close(timeout: 1_000)
    end
  end

  # Issue 53, item 5: librdkafka reads these spellings, and sluice read them otherwise.
  describe "settings read as librdkafka reads them" do
    def config(kafka)
      config = described_class.new
      config.kafka = { "bootstrap.servers": "127.0.0.1:1", "group.id": "g" }.merge(kafka)
      config.validate!.freeze
    end

    it "leaves committing to the application for enable.auto.commit off in any spelling" do
      %w[0 FALSE f False].each { |off| expect(config("enable.auto.commit": off)).not_to be_auto_commit, off }
      [true, "1", "T", "TRUE"].each { |on| expect(config("enable.auto.commit": on)).to be_auto_commit, on.inspect }
      expect(config({})).to be_auto_commit
    end

    it "takes the last of a name given twice, as librdkafka does" do
      expect(config("enable.auto.commit" => true, "enable.auto.commit": false)).not_to be_auto_commit
    end

    it "reads the group protocol in any case" do
      expect(config("group.protocol": "CONSUMER")).to be_consumer_protocol
      expect(pairs("group.protocol": "Consumer")).not_to include("heartbeat.interval.ms")
      expect { pairs("group.protocol": "CONSUMER", "session.timeout.ms": 45_000) }
        .to raise_error(Sluice::Errors::ConfigurationInvalidError, /session.timeout.ms is a setting of the classic group protocol/)
    end

    it "reads the timeouts it acts on as numbers librdkafka takes" do
      expect(config("max.poll.interval.ms": "60000ms").max_poll_interval_ms).to eq(60_000)
      expect(config("max.poll.interval.ms": "0x1000").max_poll_interval_ms).to eq(4096)
      expect(pairs("session.timeout.ms": "10000ms")["heartbeat.interval.ms"]).to eq("1000") # 10 s: a third is over 1 s
    end

    it "refuses at construction a value librdkafka refuses, naming what it takes" do
      { "enable.auto.commit": ["yes", /true or false/], "group.protocol": ["kip848", /one of classic, consumer/],
        "max.poll.interval.ms": ["five minutes", /an integer/], "enable.auto.offset.store": ["", /true or false/] }
        .each do |name, (value, expected)|
          expect { config(name => value) }
            .to raise_error(Sluice::Errors::ConfigurationInvalidError, /\Akafka property #{Regexp.escape(name.to_s)} must be .*#{expected.source}/)
        end
    end
  end

  it "sets nothing librdkafka older than 2.2 does not know, and keeps the queue its fixed second needs" do
    allow(Sluice).to receive(:librdkafka_version).and_return("2.0.2")
    expect(pairs).not_to include("fetch.queue.backoff.ms", "queued.min.messages")
  end
end
