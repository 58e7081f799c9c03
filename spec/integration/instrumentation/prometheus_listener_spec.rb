# frozen_string_literal: true

require "net/http"
require "webrick"

# PrometheusListener under load: a producer and a consumer report to it, and
# what Prometheus would see is read the way it reads it, from an HTTP scrape
# of prometheus-client-mmap's own Rack exporter.
RSpec.describe "PrometheusListener (#{TestKafka::MODE} mode)", :kafka do
  include ConsumerGroups
  include MetricsLoad

  # The exporter behind a WEBrick on an ephemeral port (the Rack env it reads is two keys).
  let(:server) do
    exporter = Prometheus::Client::Rack::Exporter.new(->(_env) { [404, {}, []] })
    WEBrick::HTTPServer.new(BindAddress: "127.0.0.1", Port: 0, Logger: WEBrick::Log.new(File::NULL), AccessLog: []).tap do |http|
      http.mount_proc("/") do |request, response|
        response.status, headers, body = exporter.call("PATH_INFO" => request.path, "HTTP_ACCEPT" => request["Accept"])
        headers.each { |key, value| response[key] = value }
        response.body = body.join
      end
    end
  end

  before do
    require "prometheus/client/rack/exporter"
    @server_thread = Thread.new { server.start }
  end

  after do
    stop_metrics_load
    server.shutdown
    @server_thread.join
  end

  def scrape = Net::HTTP.get(URI("http://127.0.0.1:#{server.config[:Port]}/metrics"))

  # name{labels} value lines whose labels include all of `labels`
  def samples(text, name, **labels)
    text.each_line.filter_map do |line|
      found = line.match(/\A#{name}\{(.*)\} (\S+)\n?\z/) or next
      pairs = found[1].scan(/(\w+)="([^"]*)"/).to_h.transform_keys(&:to_sym)
      [pairs, Float(found[2])] if labels.all? { |key, value| pairs[key] == value.to_s }
    end
  end

  def total(text, name, **labels) = samples(text, name, **labels).sum(&:last)

  it "shows a producer's and a consumer's statistics, deliveries and rebalances in a scrape" do
    monitor = Sluice::Monitor.new(logger: Logger.new(nil))
    monitor.subscribe(Sluice::Instrumentation::PrometheusListener.new(registry: Prometheus::Client::Registry.new, deliveries: true))
    producer, consumer = run_metrics_load(monitor)
    text = nil
    await_metrics(monitor) do
      text = scrape
      total(text, "sluice_messages_sent_total", client_id: producer.id) >= MetricsLoad::COUNT &&
        total(text, "sluice_acknowledged_total", client_id: producer.id) >= MetricsLoad::COUNT && # dispatched after the handles resolved
        total(text, "sluice_messages_consumed_total", client_id: consumer.id) >= MetricsLoad::COUNT &&
        samples(text, "sluice_consumer_lags", client_id: consumer.id, topic: MetricsLoad::TOPIC).size == 3
    end
    expect(total(text, "sluice_acknowledged_total", client_id: producer.id, kind: "producer", topic: MetricsLoad::TOPIC)).to eq(MetricsLoad::COUNT)
    expect(total(text, "sluice_messages_sent_bytes_total", client_id: producer.id)).to be >= MetricsLoad::COUNT * 2
    expect(total(text, "sluice_calls_total", client_id: producer.id)).to be_positive
    rtt = samples(text, "sluice_network_latency_avg", client_id: producer.id, kind: "producer")
    expect(rtt.map { |labels, _| labels[:broker] }).to eq([TestKafka::BROKERS.split(",").first])
    expect(total(text, "sluice_connection_connects_total", client_id: consumer.id, kind: "consumer")).to be_positive
    expect(samples(text, "sluice_consumer_lags", client_id: consumer.id).map { |labels, _| labels[:partition] }.sort).to eq(%w[0 1 2])
    expect(samples(text, "sluice_consumer_lags", client_id: consumer.id).map(&:last)).to all(be >= 0)
    expect(samples(text, "sluice_consumer_fetch_queue_messages", client_id: consumer.id).size).to eq(3)
    expect(total(text, "sluice_consumer_assigned_total", client_id: consumer.id, topic: MetricsLoad::TOPIC)).to eq(3)
    expect(samples(text, "sluice_queue_size", client_id: producer.id).size).to eq(1)
  end

  it "counts a failed produce under error_occurred, by type" do
    monitor = Sluice::Monitor.new(logger: Logger.new(nil))
    monitor.subscribe(Sluice::Instrumentation::PrometheusListener.new(registry: Prometheus::Client::Registry.new))
    errors = record_events(monitor, "error.occurred") # after the listener: it has counted what this sees
    producer = build_producer(monitor: monitor)
    expect { producer.produce_sync(topic: "sluice-spec-small", payload: "x" * 5_000) }.to raise_error(Sluice::Errors::ProduceError)
    errors.await { |event| event[:type] == "librdkafka.dispatch_error" }
    expect(total(scrape, "sluice_error_occurred_total", client_id: producer.id, type: "librdkafka.dispatch_error")).to eq(1)
  end
end
