# frozen_string_literal: true

require "securerandom"
require "set"

# Brokers crash under a producer: nodes of the three-node cluster (bin/kafka
# cluster: replication factor 3, min.insync.replicas=2) are SIGKILLed and
# restarted while messages are in flight, and every message is read back.
# Needs the cluster and about a minute and a half (in :fd mode), so it runs
# when asked: bin/test-cluster (SLUICE_CLUSTER_SPECS=1). The cluster is started
# here if it is not running (and then stopped again).
#
# Each example prints its figures (messages, kills, lost, duplicated,
# reordered) on one line starting with "failover".
RSpec.describe "Broker failover", :cluster, timeout: 240 do
  # (a): at least this many, at a steady rate, for as long as the kills take.
  messages = 100_000
  rate = 2_000 # messages per second
  # (b): transactions of txn_size messages; every abort_every-th one aborts on purpose.
  txn_size = 100
  min_transactions = 150
  abort_every = 5

  # librdkafka 2.0.2 (CI's system-library build) believes a restarted node's
  # stale metadata (librdkafka checks metadata against leader epochs since
  # 2.1, KIP-320): the idempotent scenario's tolerances below are for it
  # alone. The bundled 2.14.2 showed none of it in 5 runs of both modes (10
  # leader-kill scenarios); 2.0.2 in 1 of 4 (2 runs x 2 modes: 1,866 unknown_partition
  # reports, 10 refused produces). Only versions tested are trusted.
  stale_metadata = Gem::Version.new(Sluice.librdkafka_version) < Gem::Version.new("2.14")

  include ClusterScenario

  let(:topic) { TestCluster.create_topic("sluice-failover-#{SecureRandom.hex(4)}", 3) }

  # librdkafka 2.0.2 believes one broker's stale metadata: a node that has
  # just been restarted can answer "unknown topic" for a topic that exists,
  # and produce then refuses it at once (ProduceError unknown_topic; seen
  # once in CI). Nothing was enqueued, so nothing is lost: like an
  # application would, retry shortly, counting each refusal (printed).
  define_method(:stale_metadata?) { stale_metadata }

  def produce_retrying(producer, refused, **message)
    producer.produce_async(**message)
  rescue Sluice::Errors::ProduceError => e
    raise unless stale_metadata? && e.code == :unknown_topic && refused[e.code] < 100

    refused[e.code] += 1
    sleep(0.05)
    retry
  end

  # Kills the leader of partition 0, then of partition 1, ... each time waiting
  # until leadership has moved off it, restarting it and waiting until it is
  # back in every ISR. Leaders are not rebalanced back to a restarted node, so
  # each kill hits another node. @return [Array<Integer>] the nodes killed
  def kill_leaders(topic, count)
    Array.new(count) do |i|
      node = TestCluster.leaders(topic).fetch(i % 3)
      kill_and_restart(node, [topic])
    end
  end

  def kill_and_restart(node, topics)
    TestCluster.kill(node, topics)
    TestCluster.restart(node)
    node
  end

  # Per partition: what was expected (in order) against what was read.
  def tally(expected, found)
    expected.zip(found).each_with_object(Hash.new(0)) do |(want, got), figures|
      figures[:lost] += (want - got).size
      figures[:duplicated] += got.size - got.uniq.size
      figures[:reordered] += got.uniq.each_cons(2).count { |a, b| b < a }
      figures[:unexpected] += (got - want).size
    end
  end

  def read_back(topic, isolation)
    Array.new(3) { |partition| TestCluster.read_partition(topic, partition, isolation: isolation) }
  end

  it "(a) an idempotent producer loses, duplicates and reorders nothing while two partition leaders are killed" do
    producer, errors = cluster_producer(kafka: { "enable.idempotence": true })
    refused = Hash.new(0)
    handles = []
    chaos = nil
    started = now
    until handles.size >= messages && chaos && !chaos.alive?
      chaos ||= Thread.new { kill_leaders(topic, 2) } if handles.size >= messages / 10
      due = ((now - started) * rate).to_i
      handles << produce_retrying(producer, refused, topic: topic, partition: handles.size % 3, payload: handles.size.to_s) while handles.size < due
      sleep(0.01)
    end
    killed = chaos.value
    reports = handles.map { |handle| handle.wait(max_wait_timeout: 120_000, raise_response_error: false) }
    elapsed = now - started

    found = read_back(topic, "read_uncommitted")
    # librdkafka 2.0.2 also fails messages in flight when it believes that
    # stale "unknown topic" (partition count 0: unknown_partition reports; 1,868
    # of 100,017 once, under load). Those are reported to the application, not
    # lost silently: they are left out of what must be in the log, and any
    # other kind of failed report still fails the example.
    reported = reports.each_index.select { |seq| stale_metadata && reports[seq].error&.code == :unknown_partition }.to_set
    expected = Array.new(3) { |partition| (partition...handles.size).step(3).reject { |seq| reported.include?(seq) } }
    figures = tally(expected, found.map { |log| log.map { |_offset, payload| Integer(payload) } })
    by_offset = found.map(&:to_h)
    misplaced = reports.each_with_index.count { |report, seq| report.success? && by_offset[report.partition][report.offset] != seq.to_s }
    failed = reports.reject(&:success?).map { |report| report.error.code }.tally
    puts format("failover (a, %<mode>s, idempotent): %<messages>d messages in %<seconds>.0fs, %<kills>d kills (nodes %<nodes>s), " \
                "lost %<lost>d, duplicated %<duplicated>d, reordered %<reordered>d, unexpected %<unexpected>d, " \
                "failed reports %<failed>s, report offsets wrong %<misplaced>d, client errors seen %<errors>s, " \
                "produce refused and retried %<refused>s",
                mode: TestKafka::MODE, messages: handles.size, seconds: elapsed, kills: killed.size, nodes: killed.join(","),
                failed: failed, misplaced: misplaced, errors: errors, refused: refused, **figures)

    expect(killed.uniq.size).to eq(2)
    expect(failed.keys - (stale_metadata ? [:unknown_partition] : [])).to be_empty
    expect(figures).to include(lost: 0, duplicated: 0, reordered: 0, unexpected: 0)
    expect(misplaced).to eq(0)
  end

  it "(b) a transactional producer's committed messages are read exactly once, its aborted ones never, while the coordinator is killed" do
    transactional_id = "sluice-failover-#{SecureRandom.hex(4)}"
    # An abort on purpose right after producing races librdkafka 2.0.2's
    # registration of the transaction's partitions (librdkafka issue 4849, see
    # spec/integration/producer/transaction_edges_spec.rb): EndTxn meets
    # CONCURRENT_TRANSACTIONS, then invalid_txn_state, which librdkafka makes
    # fatal, and every later transaction fails. It needs no broker failure:
    # without wait_timeout_on_transaction_abort (sluice's answer: wait for the
    # first delivery) this loop lost its producer in every run, killed node or
    # not (at the 5th, 40th and 75th transaction in three runs without a kill).
    producer, errors = cluster_producer(kafka: { "transactional.id": transactional_id }, wait_timeout_on_transaction_abort: 5_000)
    outcomes = Hash.new { |h, k| h[k] = [] } # :committed, :aborted (on purpose), :failed => [batch, ...]
    failures = Hash.new(0)
    seq = 0
    transact = lambda do
      batch = (seq...(seq + txn_size)).to_a
      seq += txn_size
      abort = (outcomes.values.sum(&:size) % abort_every) == abort_every - 1
      committed = producer.transaction do
        batch.each { |s| producer.produce_async(topic: topic, partition: s % 3, payload: s.to_s) }
        raise Sluice::AbortTransaction if abort

        true
      end
      outcomes[committed ? :committed : :aborted] << batch
    rescue Sluice::Errors::TransactionError, Sluice::Errors::ProduceError => e
      failures["#{e.class.name.split("::").last}: #{e.message}"] += 1
      outcomes[:failed] << batch
    end

    started = now
    transact.call # the first one creates __transaction_state: now the coordinator has a node
    coordinator = TestCluster.coordinator(transactional_id)
    chaos = nil
    # A transaction may fail while the coordinator moves: librdkafka 2.0.2
    # believes a restarted node's stale metadata (unknown_partition for 67
    # messages of one batch, once in CI), and the transaction then fails and is
    # aborted. The producer must go on (150 commits), and nothing of a failed
    # one may be visible. Three failures stop the loop (a fatal error would
    # fail every transaction after it).
    until (outcomes[:committed].size >= min_transactions && chaos && !chaos.alive?) || outcomes[:failed].size >= 3
      chaos ||= Thread.new { kill_and_restart(coordinator, [topic, "__transaction_state"]) } if seq >= 20 * txn_size
      transact.call
    end
    chaos.value
    elapsed = now - started

    found = read_back(topic, "read_committed").map { |log| log.map { |_offset, payload| Integer(payload) } }
    committed = outcomes[:committed].flatten
    expected = Array.new(3) { |partition| committed.select { |s| s % 3 == partition } }
    figures = tally(expected, found)
    not_committed = (outcomes[:aborted] + outcomes[:failed]).flatten
    aborted_visible = (found.flatten & not_committed).size
    puts format("failover (b, %<mode>s, transactional): %<txns>d transactions (%<committed>d committed, %<aborted>d aborted on purpose, " \
                "%<failed>d failed) in %<seconds>.0fs, %<messages>d messages committed, 1 kill (node %<node>d, the coordinator), " \
                "lost %<lost>d, duplicated %<duplicated>d, reordered %<reordered>d, aborted visible %<aborted_visible>d, " \
                "failures %<failures>s, client errors seen %<errors>s",
                mode: TestKafka::MODE, txns: outcomes.values.sum(&:size), committed: outcomes[:committed].size,
                aborted: outcomes[:aborted].size, failed: outcomes[:failed].size, seconds: elapsed, messages: committed.size,
                node: coordinator, aborted_visible: aborted_visible, failures: failures, errors: errors, **figures)

    expect(figures).to include(lost: 0, duplicated: 0, reordered: 0, unexpected: 0)
    expect(aborted_visible).to eq(0) # the aborted on purpose and the failed ones
    expect(outcomes[:failed].size).to be < 3, "the producer did not recover: #{failures}"
    expect(outcomes[:committed].size).to be >= min_transactions
  end
end
