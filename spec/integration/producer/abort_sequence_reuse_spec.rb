# frozen_string_literal: true

require "sluice/testing"

# A transaction aborted while a message it sent waits for a retry: the leader
# died after writing it, before answering, so the message came back as
# "possibly persisted". The abort purges it. librdkafka as released then
# advanced the partition's sequence base past it, as past a message never
# sent, without bumping the epoch: the next transaction's message took the
# same sequence under the same epoch, and the leader, which holds the aborted
# batch under that sequence, acknowledged it as a duplicate and wrote nothing.
# The committed transaction lacked it (the exactly-once fault run lost 12 of
# 60,000 that way). The bundled librdkafka's patch 0016 bumps the epoch on
# such an abort.
#
# The mock cluster makes the leader's silence deterministic: it writes the
# batch at once and holds the answer for its broker's round-trip time, and
# a broker taken down meanwhile drops the connection. It checks a
# transactional producer's sequences as a broker does.
absent = if !Sluice::Testing::MockCluster.available?
           "librdkafka #{Sluice.librdkafka_version} was linked without its mock cluster"
         elsif ENV["SLUICE_USE_SYSTEM_LIBRDKAFKA"] == "1"
           "the system's librdkafka lacks patch 0016: it reuses the sequence"
         end
RSpec.describe "Transactional producer: an abort after a message was possibly written (mock)", timeout: 60, skip: absent do
  include Sluice::Testing::MockKafka

  let(:topic) { "sluice-spec-abort-sequence" }

  before { mock_kafka.create_topic(topic) }

  after { close_test_producers }

  def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # Waits until the partition's messages in flight (librdkafka's statistics) are count.
  def await_in_flight(statistics, count)
    deadline = monotonic + 15
    loop do
      remaining = deadline - monotonic
      raise "no statistics with #{count} message(s) in flight within 15 s" unless remaining.positive?

      partition = pop_within(statistics, remaining).dig("topics", topic, "partitions", "0")
      return if partition && partition["msgs_inflight"] == count
    end
  end

  it "keeps the next transaction's message: the abort bumps the epoch" do
    producer = build_producer(kafka: mock_kafka.kafka("transactional.id": "sluice-spec-abort-sequence", "batch.num.messages": 1,
                                                      "linger.ms": 0, "statistics.interval.ms": 50,
                                                      # The retry waits past the abort, which purges it first.
                                                      "retry.backoff.ms": 5_000, "retry.backoff.max.ms": 5_000))
    statistics = Queue.new
    producer.monitor.subscribe("statistics.emitted") { |event| statistics << event[:statistics] }
    producer.transaction { producer.produce_sync(topic: topic, partition: 0, payload: "first") }

    aborted = nil
    producer.transaction do
      # Acknowledged first, so the abort does not wait for the held one (sluice waits for a
      # transaction's first delivery before an abort: librdkafka issue 4849).
      producer.produce_sync(topic: topic, partition: 0, payload: "registered")
      mock_kafka.broker_rtt(1, 3_000)
      aborted = producer.produce_async(topic: topic, partition: 0, payload: "aborted")
      await_in_flight(statistics, 1) # sent, written, its answer held
      mock_kafka.broker_down(1)      # the connection drops: possibly persisted
      mock_kafka.broker_rtt(1, 0)
      await_in_flight(statistics, 0) # back in the queue, waiting for its retry
      mock_kafka.broker_up(1)
      raise Sluice::AbortTransaction
    end
    expect(aborted.wait(max_wait_timeout: 10_000, raise_response_error: false).error&.code).to eq(:purge_queue)

    report = producer.transaction { producer.produce_sync(topic: topic, partition: 0, payload: "after") }

    # first (0), its commit marker (1), the aborted writes (2, 3), their abort marker (4), then this one.
    # Unpatched, the mock answers the reused sequence as a duplicate: offset -1, nothing written.
    expect(report.offset).to eq(5)
  end
end
