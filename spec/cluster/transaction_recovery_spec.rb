# frozen_string_literal: true

require "securerandom"

# Issue 46: connections to every node refused for longer than the
# transaction's transaction.timeout.ms, the brokers running all along. Their
# coordinator aborts the transaction once it expires and bumps the producer's
# epoch, so the producer's next call is fenced (fatal). Before, such a
# producer never committed again (0 of 272 transactions in the minute after
# the heal); now it takes the transactional.id back (a reload) and the next
# transactions commit, at sluice's defaults.
RSpec.describe "A transactional producer after connections were refused past transaction.timeout.ms", :cluster, timeout: 180 do
  # transaction.timeout.ms
  def transaction_timeout = 5_000
  # s: past the transaction's 5 s and the brokers' abort check (every second,
  # bin/kafka), so the coordinator has aborted it before any client is back.
  outage = 12

  include ClusterScenario::NetworkFaults

  before(:context) do
    @topic = "sluice-txn-recovery-#{SecureRandom.hex(4)}"
    TestCluster.create_topics([@topic], 1)
  end

  def transactional_producer
    build_producer(kafka: { "bootstrap.servers": TestCluster::BROKERS, "transactional.id": "sluice-recovery-#{SecureRandom.hex(6)}",
                            "transaction.timeout.ms": transaction_timeout, "message.timeout.ms": transaction_timeout,
                            "socket.timeout.ms": 2_500 },
                   max_wait_timeout: 2_000)
  end

  it "commits the next 5 transactions within 30 s of the heal, each read once; the expired one stays aborted" do
    topic = @topic
    producer = transactional_producer
    reloads = record_events(producer.monitor, "producer.reloaded")
    id = SecureRandom.hex(4)
    producer.transaction { producer.produce_sync(topic: topic, payload: "before-#{id}") }
    fault = Toxiproxy::Faults.refuse(Toxiproxy::NODES)
    error = nil
    began = now
    begin
      producer.transaction do
        producer.produce_sync(topic: topic, payload: "expired-#{id}") # the coordinator's transaction began
        fault.apply
      end
    rescue Sluice::Errors::BaseError => e
      error = e
    ensure
      sleep([outage - (now - began), 0].max) # the rest of the outage: the fault's duration, not a wait for anything
      fault.heal
    end
    expect(error).to be_a(Sluice::Errors::TransactionError)
    expect(error.transaction_outcome).to eq(:unknown) # its commit was under way when it gave up
    healed = now
    failures = []
    5.times do |i|
      producer.transaction { producer.produce_sync(topic: topic, payload: "after-#{id}-#{i}") }
    rescue Sluice::Errors::BaseError => e
      raise if e.transaction_outcome_unknown? || now - healed > 30 # an unknown outcome is not made again blindly

      failures << e.code
      retry
    end
    took = now - healed
    puts "transaction recovery (#{TestKafka::MODE}): 5 transactions committed #{took.round(2)} s after the heal, " \
         "#{failures.size} failed first (#{failures.tally.map { |code, n| "#{code} #{n}" }.join(", ")}), " \
         "reloads #{reloads.events.map { |event| event[:error].code }}"
    expect_elapsed(took, within: 30, guards: "a fenced producer whose transactions fail for good after the heal (issue 46)")
    expect(reloads.events.size).to be_between(1, 2) # the fence of the expired transaction, answered by a new client

    payloads = TestCluster.read_partition(topic, 0, isolation: "read_committed").map(&:last).grep(/#{id}/)
    expect(payloads).to eq(["before-#{id}", *Array.new(5) { |i| "after-#{id}-#{i}" }])
  end
end
