# frozen_string_literal: true

# Sluice::ProducerPool: WaterDrop::ConnectionPool's counterpart, on connection_pool.
RSpec.describe "Sluice::ProducerPool", :kafka do
  let(:topic) { "sluice-spec-txn" }
  let(:prefix) { "sluice-spec-pool-#{SecureRandom.hex(4)}" }
  let(:pool) do
    Sluice::ProducerPool.new(size: 2, timeout: 0.5) do |config, index|
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
    expect(ids).to eq(["#{prefix}-0", "#{prefix}-1"])
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

  it "refuses a pool without a config block or with a bad size" do
    expect { Sluice::ProducerPool.new(size: 1) }.to raise_error(ArgumentError, /needs a block/)
    expect { Sluice::ProducerPool.new(size: 0) { nil } }.to raise_error(ArgumentError, /size must be a positive Integer/)
  end
end
