# frozen_string_literal: true

# An idempotent producer with several requests in flight to a partition:
# the first one refused (Not leader), the leader refuses the ones behind it
# as out of order. librdkafka retries them all; as released it also bumped
# the producer epoch, which renumbers every batch still to send. A batch a
# stepping-down leader had written before answering "Not leader" then went
# out again under the new epoch and was written twice (librdkafka issue
# 4953: one message in 1 of 12 rolling upgrades, bin/test-upgrade). The
# bundled librdkafka's patch 0014 retries them under the same epoch.
#
# The mock cluster refuses on demand; it cannot show the duplicate itself: it
# checks producer epochs and sequences only for a transactional producer
# (rd_kafka_mock_validate_records), so it appends an idempotent producer's
# retry anew under any epoch. What it shows is the bump: statistics' eos.
unpatched = ENV["SLUICE_USE_SYSTEM_LIBRDKAFKA"] == "1" && "the system's librdkafka lacks patch 0014: it bumps the epoch there"
RSpec.describe "Idempotent producer: a request refused behind a failed one keeps the epoch (mock cluster)", timeout: 30, skip: unpatched do
  produce = 0 # Kafka's ApiKey
  not_leader_for_partition = 6
  out_of_order_sequence_number = 45
  topic = "sluice-spec-epoch"
  # The first refused, the two behind it as out of order, all answered late: the three are in flight
  # together, as behind a leader stepping down (a later request sent after the first's answer would be
  # the first in flight, whose out-of-order answer is fatal). The leader writes none of them.
  answers = [[not_leader_for_partition, 500], [out_of_order_sequence_number, 500], [out_of_order_sequence_number, 500]]

  after { close_test_producers }

  # @return [Hash] the eos part of the first statistics emitted from now on
  def next_eos(statistics)
    statistics.clear
    pop_within(statistics)
  end

  it "retries them under the same epoch and sequences, each message written once, in order" do
    skip "this librdkafka has no mock cluster" unless Sluice::Native::TestHooks.respond_to?(:mock_broker_push_request_errors)

    producer = build_producer(kafka: { "test.mock.num.brokers": 1, "enable.idempotence": true, "batch.num.messages": 1, "linger.ms": 0,
                                       "statistics.interval.ms": 100 })
    statistics = Queue.new
    producer.monitor.subscribe("statistics.emitted") { |event| statistics << event[:statistics]["eos"] }
    # Acknowledged first: from then on several requests may be in flight (patch 0002).
    first = producer.produce_sync(topic: topic, partition: 0, payload: "0")
    Sluice::Native::TestHooks.mock_broker_push_request_errors(producer.client, 1, produce, answers)
    handles = producer.produce_many_async((1..3).map { |i| { topic: topic, partition: 0, payload: i.to_s } })
    offsets = handles.map { |handle| handle.wait(max_wait_timeout: 10_000).offset }

    expect([first.offset, *offsets]).to eq([0, 1, 2, 3])
    expect(next_eos(statistics)).to include("producer_epoch" => 0), "the producer bumped its epoch"
  end

  # A transactional producer's bump needs the transaction aborted: as released
  # the same answers made it abortable. The mock checks its sequences.
  it "commits a transaction whose requests were refused so" do
    skip "this librdkafka has no mock cluster" unless Sluice::Native::TestHooks.respond_to?(:mock_broker_push_request_errors)

    producer = build_producer(kafka: { "test.mock.num.brokers": 1, "transactional.id": "sluice-spec-epoch", "batch.num.messages": 1,
                                       "linger.ms": 0 })
    producer.transaction { producer.produce_sync(topic: topic, partition: 0, payload: "0") }
    reports = producer.transaction do
      Sluice::Native::TestHooks.mock_broker_push_request_errors(producer.client, 1, produce, answers)
      producer.produce_many_sync((1..3).map { |i| { topic: topic, partition: 0, payload: i.to_s } })
    end

    expect(reports.map(&:offset)).to eq([2, 3, 4]) # after the first transaction's message (0) and its marker (1)
  end
end
