# frozen_string_literal: true

require "socket"

# StatsdListener under load: a producer and a consumer report through a
# statsd-ruby client to a UDP socket the spec reads, as a StatsD server would.
RSpec.describe "StatsdListener (#{TestKafka::MODE} mode)", :kafka do
  include ConsumerGroups
  include MetricsLoad

  let(:capture) { StatsdCapture.new }

  after do
    stop_metrics_load
    capture.close
  end

  # [value, type] of the lines named `name` whose tags (name,key=value,...) include all of `tags`
  def sent(name, **tags)
    capture.lines.filter_map do |line|
      found = line.match(/\Asluice\.#{Regexp.escape(name)}((?:,\w+=[^,:]*)*):([^|]+)\|(\w+)\z/) or next
      pairs = found[1].scan(/,(\w+)=([^,]*)/).to_h.transform_keys(&:to_sym)
      [Float(found[2]), found[3]] if tags.all? { |key, value| pairs[key] == value.to_s }
    end
  end

  def count(name, **tags) = sent(name, **tags).sum(&:first)

  def lag_lines(consumer) = capture.lines.grep(/\Asluice\.consumer\.lags,client_id=#{consumer.id},/)

  def lag_partitions(consumer) = lag_lines(consumer).map { |line| line[/partition=(\d+)/, 1] }.uniq.sort

  # Counts are sums of deltas: a datagram lost to a full socket buffer means
  # a total never reached, so the failure says whether that happened.
  def explaining_drops
    yield
  rescue RuntimeError => e
    raise e, "#{e.message} (the socket dropped #{capture.drops} datagrams)"
  end

  it "sends a producer's and a consumer's statistics and rebalances as tagged packets" do
    monitor = Sluice::Monitor.new(logger: Logger.new(nil))
    monitor.subscribe(Sluice::Instrumentation::StatsdListener.new(port: capture.port))
    producer, consumer = run_metrics_load(monitor)
    broker = TestKafka::BROKERS.split(",").first.tr(":", "_")
    # An emission is several datagrams, and the capture reads them on its own
    # thread: everything asserted on is waited for, not only the totals (their
    # datagram could be read before the one with the broker's lines).
    explaining_drops do
      await_metrics(monitor) do
        count("messages.sent", client_id: producer.id) >= MetricsLoad::COUNT &&
          count("messages.consumed", client_id: consumer.id) >= MetricsLoad::COUNT &&
          lag_partitions(consumer) == %w[0 1 2] && # a partition's lag is in the statistics once its fetch state knows it
          sent("network.latency.avg", client_id: producer.id, broker: broker).any? &&
          sent("outbuf.requests", client_id: consumer.id, kind: "consumer", broker: broker).any? &&
          sent("queue.size", client_id: producer.id).any?
      end
    end
    expect(sent("messages.sent", client_id: producer.id, kind: "producer").map(&:last).uniq).to eq(["c"])
    expect(sent("network.latency.avg", client_id: producer.id, broker: broker).map(&:last).uniq).to eq(["g"])
    expect(sent("outbuf.requests", client_id: consumer.id, kind: "consumer", broker: broker).map(&:last).uniq).to eq(["g"])
    expect(sent("queue.size", client_id: producer.id).map(&:last).uniq).to eq(["g"])
    expect(lag_lines(consumer)).to all(match(/,topic=#{MetricsLoad::TOPIC},.*\|g\z/))
    expect(count("consumer.assigned", client_id: consumer.id, topic: MetricsLoad::TOPIC)).to eq(3)
    expect(sent("acknowledged")).to be_empty # deliveries: false
  end

  it "counts every delivered message with deliveries: true, a datagram each" do
    monitor = Sluice::Monitor.new(logger: Logger.new(nil))
    monitor.subscribe(Sluice::Instrumentation::StatsdListener.new(port: capture.port, deliveries: true))
    producer = build_producer(monitor: monitor)
    producer.produce_many_sync(Array.new(500) { |i| { topic: MetricsLoad::TOPIC, payload: "d#{i}", partition: i % 3 } })
    prefix = "sluice.acknowledged,client_id=#{producer.id},"
    explaining_drops { capture.await { |lines| lines.count { |line| line.start_with?(prefix) } >= 500 } }
    acknowledged = sent("acknowledged", client_id: producer.id, kind: "producer", topic: MetricsLoad::TOPIC)
    expect(acknowledged).to eq([[1.0, "c"]] * 500)
  end

  it "sends a transaction's time as a timing and a failed produce as an error count" do
    monitor = Sluice::Monitor.new(logger: Logger.new(nil))
    monitor.subscribe(Sluice::Instrumentation::StatsdListener.new(port: capture.port, tags: { app: "spec" }))
    transactional = build_producer(monitor: monitor, kafka: { "transactional.id": "sluice-spec-metrics-#{rand(1 << 30)}" })
    transactional.transaction { transactional.produce_async(topic: "sluice-spec-txn", payload: "t") }
    producer = build_producer(monitor: monitor)
    expect { producer.produce_sync(topic: "sluice-spec-small", payload: "x" * 5_000) }.to raise_error(Sluice::Errors::ProduceError)
    capture.await { |lines| lines.any? { |line| line.start_with?("sluice.error_occurred,") && line.include?(",client_id=#{producer.id},") } }
    expect(sent("transaction.time", client_id: transactional.id, kind: "producer", app: "spec")).to match([[be_positive, "ms"]])
    expect(sent("error_occurred", client_id: producer.id, type: "librdkafka.dispatch_error", app: "spec")).to eq([[1.0, "c"]])
  end
end
