# frozen_string_literal: true

require "prometheus/client" # here only: sluice itself must not (the first example checks, in a process of its own)

# What PrometheusListener and StatsdListener add to Metrics: the libraries
# they load, what they subscribe to, and how they write a sample.
RSpec.describe "Metrics listeners" do
  let(:statistics) do
    { "type" => "producer", "txmsgs" => 7, "msg_cnt" => 2,
      "brokers" => { "k1:9092/1" => { "nodeid" => 1, "nodename" => "k1:9092", "source" => "learned", "rtt" => { "avg" => 700 } } } }
  end

  def event(name, payload) = Sluice::Monitor::Event.new(name, payload)

  it "are not loaded with sluice: each listener requires its library when built" do
    out, status = run_scenario(<<~RUBY)
      puts $LOADED_FEATURES.grep(%r{prometheus/client|/statsd\\.rb}).size
      Sluice::Instrumentation::StatsdListener.new
      puts $LOADED_FEATURES.grep(%r{/statsd\\.rb}).size
    RUBY
    expect([out, status.success?]).to eq(["0\n1\n", true])
  end

  it "name the package to install when their library is missing" do
    expect { Sluice::Instrumentation::MetricsListener.require_library("sluice/no_such_library", "ruby-nothing (gem nothing)") }
      .to raise_error(LoadError, %r{sluice/no_such_library is needed for this listener: install ruby-nothing \(gem nothing\)})
  end

  { "StatsdListener" => -> { Sluice::Instrumentation::StatsdListener.new(client: Object.new) },
    "PrometheusListener" => -> { Sluice::Instrumentation::PrometheusListener.new(registry: Prometheus::Client::Registry.new) } }.each do |name, build|
    it "subscribe to every delivered message only when asked to (#{name})" do
      monitor = Sluice::Monitor.new(logger: Logger.new(nil))
      monitor.subscribe(build.call)
      expect(monitor.listening?("message.acknowledged")).to be(false)
      expect(monitor.listening?("statistics.emitted")).to be(true)
      expect(monitor.listening?("error.occurred")).to be(true)
    end
  end

  it "subscribe to deliveries with deliveries: true" do
    monitor = Sluice::Monitor.new(logger: Logger.new(nil))
    monitor.subscribe(Sluice::Instrumentation::StatsdListener.new(client: Object.new, deliveries: true))
    expect(monitor.listening?("message.acknowledged")).to be(true)
  end

  describe Sluice::Instrumentation::StatsdListener do
    # Records calls as a DogStatsD client gets them.
    let(:dogstatsd) do
      Class.new do
        attr_reader :calls

        def initialize = @calls = []
        %i[count gauge timing].each { |type| define_method(type) { |name, value, tags:| @calls << [type, name, value, tags] } }
      end.new
    end

    let(:capture) { StatsdCapture.new }

    after { capture.close }

    it "puts graphite tags in the name, without the separators a tag value cannot hold" do
      listener = described_class.new(port: capture.port, tag_format: :graphite, namespace: "app", tags: { host: "h 1" })
      listener.on_error_occurred(event("error.occurred", producer_id: "p;1", type: "x"))
      capture.await(&:any?)
      expect(capture.lines).to eq(["app.error_occurred;host=h_1;client_id=p_1;kind=producer;type=x:1|c"])
    end

    it "hands a DogStatsD client its tags as key:value strings" do
      listener = described_class.new(client: dogstatsd, tag_format: :dogstatsd)
      listener.on_statistics_emitted(event("statistics.emitted", producer_id: "p1", statistics: statistics))
      expect(dogstatsd.calls).to include([:count, "sluice.messages.sent", 7, ["client_id:p1", "kind:producer"]],
                                         [:gauge, "sluice.network.latency.avg", 700, ["client_id:p1", "kind:producer", "broker:k1:9092"]])
    end

    it "counts a consumer's retries and dead letters" do
      listener = described_class.new(client: dogstatsd, tag_format: :dogstatsd)
      listener.on_consumer_retry(event("consumer.retry", consumer_id: "c1", topic: "orders"))
      listener.on_consumer_dead_lettered(event("consumer.dead_lettered", consumer_id: "c1", topic: "orders", count: 2))
      tags = ["client_id:c1", "kind:consumer", "topic:orders"]
      expect(dogstatsd.calls).to eq([[:count, "sluice.consumer.retries", 1, tags], [:count, "sluice.consumer.dead_letters", 2, tags]])
    end

    it "refuses a tag format it does not know" do
      expect { described_class.new(client: dogstatsd, tag_format: :json) }.to raise_error(ArgumentError, /tag_format must be one of/)
    end
  end

  describe Sluice::Instrumentation::PrometheusListener do
    let(:registry) { Prometheus::Client::Registry.new }

    it "registers counters (_total), gauges and ms histograms with the given labels" do
      listener = described_class.new(registry: registry, labels: { host: "h1" })
      listener.on_statistics_emitted(event("statistics.emitted", producer_id: "p1", statistics: statistics))
      listener.on_transaction_finished(event("transaction.finished", producer_id: "p1", time: 30.0))
      labels = { host: "h1", client_id: "p1", kind: "producer" }
      expect(registry.get(:sluice_messages_sent_total).get(labels)).to eq(7)
      expect(registry.get(:sluice_network_latency_avg).get(labels.merge(broker: "k1:9092"))).to eq(700)
      expect(registry.get(:sluice_transaction_time).type).to eq(:histogram)
      expect(registry.get(:sluice_transaction_time).get(labels)[50]).to eq(1)
    end

    it "counts a consumer's retries and dead letters" do
      listener = described_class.new(registry: registry)
      listener.on_consumer_retry(event("consumer.retry", consumer_id: "c1", topic: "orders"))
      listener.on_consumer_dead_lettered(event("consumer.dead_lettered", consumer_id: "c1", topic: "orders", count: 2))
      labels = { client_id: "c1", kind: "consumer", topic: "orders" }
      expect(registry.get(:sluice_consumer_retries_total).get(labels)).to eq(1)
      expect(registry.get(:sluice_consumer_dead_letters_total).get(labels)).to eq(2)
    end

    it "shares the metrics a listener registered before it in the same registry" do
      first = described_class.new(registry: registry)
      second = described_class.new(registry: registry)
      first.on_error_occurred(event("error.occurred", producer_id: "p1", type: "x"))
      second.on_error_occurred(event("error.occurred", producer_id: "p1", type: "x"))
      expect(registry.get(:sluice_error_occurred_total).get(client_id: "p1", kind: "producer", type: "x")).to eq(2)
    end

    # Issue 41: a counter's increments went silently into the application's
    # gauge of the same name, exposed with the other type and an extra label.
    it "refuses a registry holding one of its names that no sluice listener registered, naming it and the way out" do
      registry.gauge(:sluice_messages_sent_total, "the application's own")
      expect { described_class.new(registry: registry) }.to raise_error(
        Sluice::Errors::MetricNameTakenError, /\Asluice_messages_sent_total is registered .* \(a gauge\), not by a sluice listener: .*namespace/
      )
      listener = described_class.new(registry: registry, namespace: "billing_sluice")
      listener.on_statistics_emitted(event("statistics.emitted", producer_id: "p1", statistics: statistics))
      expect(registry.get(:billing_sluice_messages_sent_total).get(client_id: "p1", kind: "producer")).to eq(7)
      expect(registry.get(:sluice_messages_sent_total).get({})).to eq(0) # the application's gauge, untouched
    end
  end
end
