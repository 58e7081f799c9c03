# frozen_string_literal: true

require "securerandom"
require_relative "network_workloads"

# The network fails between the clients and the three-node cluster, the brokers
# still seeing each other: toxiproxy (spec/support/toxiproxy.rb) in front of
# every node slows every link, blackholes or refuses the partition leader for
# longer than socket.timeout.ms (and far less than message.timeout.ms), or
# resets every connection in a storm, then heals. Under each fault:
#
# - an idempotent and a transactional producer send numbered, keyed messages,
#   read back afterwards directly (the nodes' INTERNAL listeners, no proxy:
#   what the check sees cannot depend on the heal): nothing lost, duplicated
#   or reordered per key, every handle resolved, no uncommitted message visible;
# - a consumer group of two processes reads the idempotent topic through the
#   proxies: nothing missing after the heal, rebalances counted;
# - flush, close and commit started during the fault return within their
#   timeouts, and every message of the closed producer is reported.
#
# Each example prints its counts on lines starting with "network fault".
# Runs with the cluster specs: bin/test-cluster (SLUICE_CLUSTER_SPECS=1).
RSpec.describe "Network faults", :cluster, timeout: 240 do
  outage = 6 # s: socket.timeout.ms (2.5 s) < outage < message.timeout.ms (60 s)
  call_timeout = 2_000 # ms: flush, close and commit started during a fault
  slack = 1.5 # s a bounded call may overrun its timeout on a loaded machine
  rate = 500 # messages per second, each producer

  faults = {
    "slow network on every node" => ->(_leader) { Toxiproxy::Faults.slow(Toxiproxy::NODES) },
    "blackhole of the leader" => ->(leader) { Toxiproxy::Faults.blackhole([leader]) },
    "connections to the leader refused" => ->(leader) { Toxiproxy::Faults.refuse([leader]) },
    "reset storm on every node" => ->(_leader) { Toxiproxy::Faults.reset(Toxiproxy::NODES) }
  }

  include ClusterScenario::NetworkFaults

  before(:context) do
    # Up front (a first message to a missing topic waits for its creation), and
    # per fault: what one example left in a topic must not count in the next.
    @topics = faults.keys.each_with_index.to_h do |name, index|
      prefix = "sluice-netfault-#{SecureRandom.hex(4)}-#{index}"
      [name, TestCluster.create_topics(%w[idempotent transactional calls].map { |kind| "#{prefix}-#{kind}" }, 3)]
    end
  end

  define_method(:outage) { outage }
  define_method(:rate) { rate }

  def faulted_producer(**kafka) = cluster_producer(kafka: NetworkWorkloads::TIMEOUTS.merge(kafka))

  # The fault for outage seconds; a storm is five short ones, a second apart.
  # (These sleeps are the fault's duration, not a wait for anything.)
  def run_fault(fault)
    return Toxiproxy.with(fault) { sleep(outage) } unless fault.name == "reset"

    5.times do
      Toxiproxy.with(fault) { sleep(0.3) }
      sleep(0.9)
    end
  end

  # @return [Array(Array<Delivery::Report>, Integer)] the resolved reports and how many handles stayed pending
  def wait_all(handles, seconds)
    deadline = now + seconds
    reports = handles.filter_map do |handle|
      handle.wait(max_wait_timeout: [((deadline - now) * 1000).to_i, 1].max, raise_response_error: false)
    rescue Sluice::Errors::WaitTimeoutError
      nil
    end
    [reports, handles.size - reports.size]
  end

  def read_back(topic, isolation)
    Array.new(3) { |partition| TestCluster.read_partition(topic, partition, isolation: isolation).map { |_offset, payload| Integer(payload) } }
  end

  def line(fault, what, figures)
    puts "network fault (#{TestKafka::MODE}) #{fault} / #{what}: #{figures.map { |name, value| "#{name} #{value}" }.join(", ")}"
  end

  faults.each do |name, build|
    it "#{name}: producers lose, duplicate and reorder nothing; a group of two processes misses nothing" do
      idempotent_topic, transactional_topic, = @topics.fetch(name)
      fault = build.call(TestCluster.leader(idempotent_topic, 0))
      group = NetworkWorkloads::Group.new(idempotent_topic, 3)
      group.await_members
      progress = NetworkWorkloads::Progress.new
      idempotent_producer, idempotent_errors = faulted_producer("enable.idempotence": true)
      transactional_producer, = faulted_producer("transactional.id": "sluice-netfault-#{SecureRandom.hex(4)}")
      idempotent = NetworkWorkloads::IdempotentLoad.new(idempotent_producer, idempotent_topic, progress, per_second: rate)
      transactional = NetworkWorkloads::TransactionalLoad.new(transactional_producer, transactional_topic, progress)

      progress.await(60, "messages before the fault") { |counts| counts[:idempotent] >= rate && counts[:committed] >= 3 }
      run_fault(fault)
      healed = { idempotent: progress[:idempotent], committed: progress[:committed] }
      progress.await(90, "messages after the heal") do |counts|
        counts[:idempotent] >= healed[:idempotent] + rate && counts[:committed] >= healed[:committed] + 3
      end
      handles = idempotent.finish
      transactional.finish

      reports, unresolved = wait_all(handles, 90)
      failed = reports.reject(&:success?).map { |report| report.error.code }.tally
      sent = Array.new(handles.size) { |seq| seq }
      figures = NetworkWorkloads::Tally.figures(sent, read_back(idempotent_topic, "read_uncommitted"))
      line(fault, "idempotent producer", sent: sent.size, **figures.slice(:lost, :duplicated, :reordered),
                                         failed: failed.values.sum, unresolved: unresolved, "client errors" => idempotent_errors)

      committed = transactional.outcomes[:committed].flatten
      not_committed = transactional.outcomes[:failed].flatten
      txn_figures = NetworkWorkloads::Tally.figures(committed, read_back(transactional_topic, "read_committed"), not_committed: not_committed)
      line(fault, "transactional producer", committed: transactional.outcomes[:committed].size, failed: transactional.outcomes[:failed].size,
                                            messages: committed.size, **txn_figures, failures: transactional.failures)

      group.await_seen(sent.map(&:to_s))
      group_figures = group.tally(sent.map(&:to_s))
      group.finish
      line(fault, "group of two processes", messages: sent.size, missing: group_figures[:missing],
                                            "read more than once" => group_figures[:more_than_once], rebalances: group.rebalances)

      expect(figures).to include(lost: 0, duplicated: 0, reordered: 0)
      expect(failed).to be_empty
      expect(unresolved).to eq(0)
      expect(txn_figures).to include(lost: 0, duplicated: 0, reordered: 0, not_committed_visible: 0)
      expect(progress[:committed]).to be > healed[:committed] # the transactional producer went on after the heal
      expect(group_figures[:missing]).to eq(0)
    ensure
      group&.kill
    end

    it "#{name}: flush, close and commit started during the fault return within their timeouts, every message reported", :polling do
      topic = @topics.fetch(name).last
      fault = build.call(TestCluster.leader(topic, 0))
      producer, = faulted_producer("enable.idempotence": true)
      # Connected to every leader before the fault. Setup, not the calls under test: it may wait for what
      # the previous example's fault or the topics' creation left settling (CI once took over 5 s here).
      3.times { |partition| producer.produce_async(topic: topic, partition: partition, payload: "before").wait(max_wait_timeout: 30_000) }
      consumer = Sluice::Consumer.new do |config|
        config.kafka = { "bootstrap.servers": TestCluster::BROKERS, "group.id": "sluice-netfault-#{SecureRandom.hex(4)}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": false, "socket.timeout.ms": 2_500 }
        config.polling.mode = TestKafka::MODE
        config.max_wait_timeout = call_timeout
        config.logger = Logger.new(nil)
      end
      consumer.subscribe(topic)
      deadline = now + 60
      message = consumer.poll(500) until message || now > deadline
      raise "the consumer read nothing within 60s" unless message

      consumer.store_offset(message)

      times = {}
      outcomes = {}
      timed = lambda do |call, &block|
        started = now
        outcomes[call] = begin
          block.call
        rescue StandardError => e
          e.class.name.split("::").last
        end
        times[call] = now - started
      end
      handles = nil
      Toxiproxy.with(fault) do
        handles = Array.new(500) { |seq| producer.produce_async(topic: topic, partition: 0, payload: seq.to_s) }
        [
          Thread.new do
            timed.call(:flush) { producer.flush(call_timeout) }
            timed.call(:close) { producer.close(timeout: call_timeout) }
          end,
          Thread.new do
            timed.call(:commit) { consumer.commit }
            timed.call(:consumer_close) { consumer.close(timeout: call_timeout) }
          end
        ].each(&:join)
      end

      unresolved = handles.count(&:pending?)
      outcome = handles.map { |handle| handle.success? ? :delivered : handle.error.code }.tally
      line(fault, "calls during the fault (timeout #{call_timeout} ms)",
           **times.transform_values { |seconds| format("%.2fs", seconds) }, results: outcomes, "500 messages" => outcome, unresolved: unresolved)

      expect(times.keys).to contain_exactly(:flush, :close, :commit, :consumer_close)
      times.each do |call, seconds|
        guards = "#{call} past its #{call_timeout} ms timeout, waiting out the fault (#{name})"
        expect_elapsed(seconds, within: (call_timeout / 1000.0) + slack, guards: guards)
      end
      expect(unresolved).to eq(0)
      expect(outcome.values.sum).to eq(500)
    ensure
      consumer&.close(timeout: 5_000)
    end
  end
end
