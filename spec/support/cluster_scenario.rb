# frozen_string_literal: true

# The scaffolding every scenario on the three-node cluster (spec/cluster/,
# tagged :cluster) sets up alike: `include ClusterScenario` starts the cluster
# once per file (TestCluster.start) and gives the helpers below;
# `include ClusterScenario::NetworkFaults` also wants toxiproxy answering and
# clears every fault before the file and after each example.
module ClusterScenario
  def self.included(group)
    group.before(:context) { TestCluster.start }
  end

  # For the scenarios that inject network faults through toxiproxy.
  module NetworkFaults
    def self.included(group)
      group.include(ClusterScenario)
      group.before(:context) do
        raise "toxiproxy is not answering on #{Toxiproxy::API} (bin/kafka cluster start runs it)" unless Toxiproxy.running?

        Toxiproxy.reset
      end
      # A fault must never outlive its example.
      group.after { Toxiproxy.reset }
    end
  end

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # A producer through the proxies, and the errors librdkafka reported to it (code or type => times).
  # @return [Array(Sluice::Producer, Hash)]
  def cluster_producer(kafka: {}, **settings)
    producer = build_producer(kafka: { "bootstrap.servers": TestCluster::BROKERS }.merge(kafka), **settings)
    errors = Hash.new(0)
    producer.monitor.subscribe("error.occurred") do |event|
      error = event.payload[:error]
      errors[error.respond_to?(:code) ? error.code : event.payload[:type]] += 1
    end
    [producer, errors]
  end

  # Produces count messages (the block gives message i's produce_async
  # arguments) idempotently, before the faults: every one acknowledged, or it raises.
  # @return [Array<Sluice::Delivery::Report>] their reports, in order
  def produce_acknowledged(count)
    producer = build_producer(kafka: { "bootstrap.servers": TestCluster::BROKERS, "enable.idempotence": true, "linger.ms": 20 })
    handles = Array.new(count) { |i| producer.produce_async(**yield(i)) }
    reports = handles.map { |handle| handle.wait(max_wait_timeout: 60_000, raise_response_error: false) }
    failed = reports.reject(&:success?)
    raise "#{failed.size} of #{count} messages not delivered: #{failed.first.error}" unless failed.empty?

    reports
  end
end
