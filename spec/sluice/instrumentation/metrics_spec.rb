# frozen_string_literal: true

# The one mapping behind both metrics listeners, on statistics shaped as
# librdkafka emits them.
RSpec.describe Sluice::Instrumentation::Metrics do
  subject(:metrics) { described_class.new }

  def event(payload) = Sluice::Monitor::Event.new("x", payload)

  def broker(nodeid, source, txerrs: 0, avg: 100)
    { "nodeid" => nodeid, "nodename" => "k1:9092", "source" => source, "txerrs" => txerrs, "rtt" => { "avg" => avg } }
  end

  def statistics(type, txmsgs: 0, brokers: {}, topics: {})
    { "type" => type, "txmsgs" => txmsgs, "msg_cnt" => 2, "brokers" => brokers, "topics" => topics }
  end

  def produced(txmsgs, id: "p1", **more) = metrics.statistics(event(producer_id: id, statistics: statistics("producer", txmsgs: txmsgs, **more)))

  def find(samples, name) = samples.select { |sample| sample.name == name }

  it "tags every statistics sample with the client's id and kind" do
    sample = find(produced(5), "queue.size").first
    expect(sample.to_a).to eq([:gauge, "queue.size", 2, { client_id: "p1", kind: "producer" }])
  end

  it "counts a running total's increase, the whole total at first" do
    expect(find(produced(5), "messages.sent").map(&:value)).to eq([5])
    expect(find(produced(12), "messages.sent").map(&:value)).to eq([7])
    expect(find(produced(12, id: "p2"), "messages.sent").map(&:value)).to eq([12]) # another client, another series
  end

  it "counts a total that went down (a new librdkafka handle) whole" do
    produced(10)
    expect(find(produced(3), "messages.sent").map(&:value)).to eq([3])
  end

  it "forgets a closed client's totals" do
    produced(10)
    metrics.closed(event(producer_id: "p1"))
    expect(find(produced(10), "messages.sent").map(&:value)).to eq([10])
  end

  it "reports real brokers only: not the bootstrap entry nor the logical GroupCoordinator" do
    brokers = { "k1:9092/1" => broker(1, "learned", avg: 700), "k1:9092/bootstrap" => broker(-1, "configured", avg: 1),
                "GroupCoordinator" => broker(1, "logical", avg: 2) }
    samples = find(produced(0, brokers: brokers), "network.latency.avg")
    expect(samples.map { |sample| [sample.value, sample.tags] }).to eq([[700, { client_id: "p1", kind: "producer", broker: "k1:9092" }]])
  end

  it "skips a number librdkafka did not report" do
    expect(find(produced(0, brokers: { "k1:9092/1" => broker(1, "learned").merge("rtt" => nil) }), "network.latency.avg")).to be_empty
  end

  it "reports the lag and fetch queue of the partitions a consumer fetches, once their lag is known" do
    partitions = {
      "0" => { "fetch_state" => "active", "consumer_lag_stored" => 4, "fetchq_cnt" => 9, "fetchq_size" => 90 },
      "1" => { "fetch_state" => "active", "consumer_lag_stored" => -1, "fetchq_cnt" => 0, "fetchq_size" => 0 },
      "2" => { "fetch_state" => "stopped", "consumer_lag_stored" => 3, "fetchq_cnt" => 0, "fetchq_size" => 0 },
      "-1" => { "fetch_state" => "none", "consumer_lag_stored" => -1, "fetchq_cnt" => 0, "fetchq_size" => 0 }
    }
    stats = statistics("consumer", topics: { "t" => { "partitions" => partitions } })
    samples = metrics.statistics(event(consumer_id: "c1", statistics: stats))
    expect(find(samples, "consumer.lags").map { |sample| [sample.value, sample.tags] })
      .to eq([[4, { client_id: "c1", kind: "consumer", topic: "t", partition: "0" }]])
    expect(find(samples, "consumer.fetch_queue.messages").map(&:value)).to eq([9])
  end

  it "reports no partitions of a producer" do
    stats = { "t" => { "partitions" => { "0" => { "fetch_state" => "active", "consumer_lag_stored" => 4 } } } }
    expect(find(produced(0, topics: stats), "consumer.lags")).to be_empty
  end

  it "counts errors by type, rebalanced partitions by topic, and times transactions" do
    error = metrics.error(event(consumer_id: "c1", type: "consumer.commit_error")).first
    expect(error.to_a).to eq([:count, "error_occurred", 1, { client_id: "c1", kind: "consumer", type: "consumer.commit_error" }])
    assigned = metrics.assigned(event(consumer_id: "c1", partitions: { "a" => [0, 1], "b" => [2] }))
    expect(assigned.map { |sample| [sample.value, sample.tags[:topic]] }).to eq([[2, "a"], [1, "b"]])
    expect(metrics.transaction(event(producer_id: "p1", time: 12.5)).first.to_a)
      .to eq([:timing, "transaction.time", 12.5, { client_id: "p1", kind: "producer" }])
    expect(metrics.budget_exceeded(event(consumer_id: "c1", max_time: 100)).first.to_a)
      .to eq([:count, "polling.budget_exceeded", 1, { client_id: "c1", kind: "consumer" }])
  end

  it "counts retries and dead-lettered messages by source topic" do
    expect(metrics.retried(event(consumer_id: "c1", topic: "orders", attempt: 1)).first.to_a)
      .to eq([:count, "consumer.retries", 1, { client_id: "c1", kind: "consumer", topic: "orders" }])
    expect(metrics.dead_lettered(event(consumer_id: "c1", topic: "orders", count: 3)).first.to_a)
      .to eq([:count, "consumer.dead_letters", 3, { client_id: "c1", kind: "consumer", topic: "orders" }])
  end

  it "describes every metric it makes" do
    names = (described_class::ROOT + described_class::BROKER + described_class::PARTITION).map(&:name) + described_class::EVENTS.keys
    expect(described_class::HELP.keys).to match_array(names)
    expect(described_class::HELP.values).to all(match(/\A\w/))
  end
end
