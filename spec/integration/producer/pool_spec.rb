# frozen_string_literal: true

# Sluice::ProducerPool: WaterDrop::ConnectionPool's counterpart, with its
# arguments (timeout in ms, producers numbered from 1) and surface (the
# process's pool, stats, reload, connection_pool.* events), on connection_pool.
RSpec.describe "Sluice::ProducerPool", :kafka do
  let(:topic) { "sluice-spec-txn" }
  let(:prefix) { "sluice-spec-pool-#{SecureRandom.hex(4)}" }
  let(:pool) do
    Sluice::ProducerPool.new(size: 2, timeout: 500) do |config, index|
      config.kafka = { "bootstrap.servers": TestKafka::BROKERS, "transactional.id": "#{prefix}-#{index}" }
      config.polling.mode = TestKafka::MODE
      config.logger = Logger.new(nil)
    end
  end

  after { pool.close }

  it "builds producers when first needed, each with its own index, and lends the same one to nested calls" do
    expect(pool.size).to eq(2)
    ids = []
    pool.with do |producer|
      ids << producer.config.kafka_setting("transactional.id")
      pool.with { |again| expect(again).to equal(producer) }
      other = Thread.new { pool.with { |second| second.config.kafka_setting("transactional.id") } }.value
      ids << other
    end
    expect(ids).to eq(["#{prefix}-1", "#{prefix}-2"]) # WaterDrop's numbering
  end

  it "makes a thread wait for a free producer, and raises ConnectionPool::TimeoutError after timeout" do
    held = Queue.new
    release = Queue.new
    holders = Array.new(2) do
      Thread.new do
        pool.with do
          held << true
          release.pop
        end
      end
    end
    2.times { held.pop }
    expect { pool.with { nil } }.to raise_error(ConnectionPool::TimeoutError)
    2.times { release << true }
    holders.each(&:join)
    expect(pool.with(&:class)).to eq(Sluice::Producer)
  end

  it "runs a transaction on a pooled producer: its messages become visible together" do
    id = SecureRandom.hex(4)
    reports = pool.transaction do |producer|
      producer.produce_many_sync([{ topic: topic, payload: "pool-#{id}-a" }, { topic: topic, payload: "pool-#{id}-b" }])
    end
    expect(reports.map(&:error)).to all(be_nil)
    read = consume_until(topic, 0, reports.first.offset, isolation: "read_committed") { |m| m[:payload] == "pool-#{id}-b" }
    expect(read.map { |m| m[:payload] }.grep(/#{id}/)).to eq(["pool-#{id}-a", "pool-#{id}-b"])
  end

  it "closes every producer it built" do
    producers = []
    pool.with { |producer| producers << producer }
    pool.close
    expect(producers).to all(be_closed)
    expect { pool.with { nil } }.to raise_error(ConnectionPool::PoolShuttingDownError)
  end

  it "takes WaterDrop's timeout in milliseconds: a 500 ms wait for a free producer ends in about half a second" do
    held = Queue.new
    release = Queue.new
    holders = Array.new(2) do
      Thread.new do
        pool.with do
          held << true
          release.pop
        end
      end
    end
    2.times { held.pop }
    expect_within(3, at_least: 0.4, guards: "the 500 ms timeout read as less, or as 500 s") do
      expect { pool.with { nil } }.to raise_error(ConnectionPool::TimeoutError)
    end
    2.times { release << true }
    holders.each(&:join)
  end

  it "keeps WaterDrop's one-parameter block, reports stats and reloads its producers" do
    one = Sluice::ProducerPool.new(size: 1, timeout: 1_000) do |config|
      config.kafka = { "bootstrap.servers": TestKafka::BROKERS }
      config.polling.mode = TestKafka::MODE
      config.logger = Logger.new(nil)
    end
    first = one.with(&:itself)
    expect(one.stats).to eq(size: 1, available: 1)
    one.reload
    expect(first).to be_closed
    expect(one.with(&:itself)).not_to equal(first)
  ensure
    one&.shutdown
  end

  it "sets up one pool for the process (Sluice.with, Sluice.transaction) and reports connection_pool events" do
    events = []
    %w[connection_pool.created connection_pool.setup connection_pool.reload connection_pool.reloaded connection_pool.shutdown].each do |name|
      Sluice::ProducerPool.monitor.subscribe(name) { |event| events << event.id }
    end
    expect { Sluice.with { nil } }.to raise_error(Sluice::Errors::ProducerClosedError, /setup first/)
    Sluice::ProducerPool.setup(size: 1) do |config, index|
      config.kafka = { "bootstrap.servers": TestKafka::BROKERS, "transactional.id": "#{prefix}-global-#{index}" }
      config.polling.mode = TestKafka::MODE
      config.logger = Logger.new(nil)
    end
    expect(Sluice::ProducerPool).to be_active
    expect(Sluice.pool).to equal(Sluice::ProducerPool.default_pool)
    report = Sluice.transaction { |producer| producer.produce_sync(topic: topic, payload: "global-#{prefix}") }
    expect(report.error).to be_nil
    expect(Sluice.with { |producer| producer.config.kafka_setting("transactional.id") }).to eq("#{prefix}-global-1")
    expect(Sluice::ProducerPool.stats).to eq(size: 1, available: 1)
    Sluice::ProducerPool.reload
    Sluice::ProducerPool.shutdown
    expect(Sluice::ProducerPool).not_to be_active
    expect(events).to eq(%w[connection_pool.created connection_pool.setup connection_pool.reloaded connection_pool.reload
                            connection_pool.shutdown])
  ensure
    Sluice::ProducerPool.shutdown
  end

  it "refuses a pool without a config block or with a bad size" do
    expect { Sluice::ProducerPool.new(size: 1) }.to raise_error(ArgumentError, /needs a block/)
    expect { Sluice::ProducerPool.new(size: 0) { nil } }.to raise_error(ArgumentError, /size must be a positive Integer/)
  end
end
