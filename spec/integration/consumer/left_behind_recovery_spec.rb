# frozen_string_literal: true

require "logger"
require "sluice/testing"

# Issue 55 item 1: a member whose commit before a revoke failed, and which
# gets the partition back, read it again from the last successful commit:
# from 0 with auto.offset.reset: earliest and nothing committed yet, or from
# the end with latest (what came meanwhile skipped). It resumes after what it
# processed itself instead, unless the group committed further since.
#
# The mock cluster refuses the revocation's OffsetCommit on demand.
absent = !Sluice::Testing::MockCluster.available? && "librdkafka #{Sluice.librdkafka_version} was linked without its mock cluster"
RSpec.describe "Consumer: a partition given back after a failed commit resumes after what was processed (mock)", timeout: 60, skip: absent do
  include Sluice::Testing::MockKafka

  topic = "sluice-spec-left-behind"

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # The join after an unsubscribe waits for the session to end; a mock
  # without group.initial.rebalance.delay.ms (2.0.2) delays every join 3 s,
  # which a shorter session does not survive. Not 1 s either: a join into a
  # group with members then waits exactly session.timeout.ms for them, and
  # the mock's once-a-second session check, due at the same moment, could
  # expire the joining member first and never answer its JoinGroup
  # (librdkafka 2.15.0's rdkafka_mock_cgrp.c; seen in 2 of 40 runs). Above
  # 1 s the wait is the session less 1 s.
  def session_ms = Sluice::Testing::MockCluster.initial_rebalance_delay? ? 1_500 : 4_000

  def consumer(events, reset, assignor = "range,roundrobin")
    consumer = Sluice::Consumer.new do |config|
      config.kafka = mock_kafka.kafka("group.id": "left-behind", "auto.offset.reset": reset, "partition.assignment.strategy": assignor,
                                      "auto.commit.interval.ms": 600_000, # only the revocation commits
                                      "session.timeout.ms": session_ms, "heartbeat.interval.ms": 200)
      config.polling.mode = TestKafka::MODE
      config.logger = Logger.new(nil)
    end
    %w[consumer.offsets_left_behind consumer.offsets_recovered].each do |name|
      consumer.monitor.subscribe(name) { |event| events << [name, event.payload] }
    end
    consumer
  end

  def produce(topic, payloads)
    producer = build_producer(kafka: mock_kafka.kafka)
    payloads.map { |payload| producer.produce_sync(topic: topic, partition: 0, payload: payload).offset }
  ensure
    producer&.close
  end

  # The first message read within seconds, or nil.
  def first_message(consumer, seconds) = poll_messages(consumer, 1, seconds: seconds, poll_ms: 100).first

  # m0..m2 processed and stored, their commit refused as the partition is
  # revoked; m3..m5 produced while this member has no partition.
  # @return [Integer] the offset of m3
  def leave_three_behind(member, topic)
    member.subscribe(topic)
    nil until produce(topic, %w[w]) && first_message(member, 1) # assigned, its position known (latest: the end)
    produce(topic, %w[m0 m1 m2])
    member.each_message { |message| member.stop if message.payload == "m2" }
    # Ours, and librdkafka's own as it unassigns (enable.auto.commit), are refused.
    mock_kafka.inject_errors(:offset_commit, :illegal_generation, count: 5)
    member.unsubscribe
    deadline = now + 10
    member.poll(100) until member.assignment.empty? || now > deadline # the revocation is answered by a read
    mock_kafka.clear_errors(:offset_commit)
    produce(topic, %w[m3 m4 m5]).first
  end

  before do
    mock_kafka.create_topic(topic)
  end

  [%w[earliest range], %w[latest range], %w[earliest cooperative-sticky]].each do |reset, assignor|
    it "resumes at the offset its failed commit carried (auto.offset.reset: #{reset}, #{assignor}), commits it and reports it" do
      events = Queue.new
      member = consumer(events, reset, assignor)
      resumed = leave_three_behind(member, topic)
      member.subscribe(topic)

      expect(first_message(member, 10)&.payload).to eq("m3")
      seen = Array.new(events.size) { events.pop }
      expect(seen).to include(["consumer.offsets_recovered", hash_including(partitions: { topic => { 0 => resumed } })])
      deadline = now + 5 # committed under the new generation (asynchronously), before anything else is processed
      landed = -> { member.committed == { topic => { 0 => resumed } } || now > deadline }
      member.poll(50) until landed.call
      expect(member.committed).to eq(topic => { 0 => resumed })
    ensure
      member&.close
    end
  end

  it "starts where another member committed since, when that is further" do
    events = Queue.new
    member = consumer(events, "earliest")
    resumed = leave_three_behind(member, topic)
    other = consumer(Queue.new, "earliest")
    other.subscribe(topic)
    nil until first_message(other, 1)&.payload == "m4"
    other.commit(topic => { 0 => resumed + 2 })
    other.close
    member.subscribe(topic)

    expect(first_message(member, 10)&.payload).to eq("m5")
    seen = Array.new(events.size) { events.pop }
    expect(seen).to include(["consumer.offsets_recovered", hash_including(partitions: { topic => { 0 => resumed + 2 } })])
  ensure
    other&.close
    member&.close
  end

  it "resumes after what it stored when its assignment was lost (no commit could be made)" do
    skip "KIP-848's heartbeat is another request" if GroupProtocol.consumer?

    events = Queue.new
    member = consumer(events, "earliest")
    member.subscribe(topic)
    nil until produce(topic, %w[w]) && first_message(member, 1)
    resumed = produce(topic, %w[m0 m1 m2]).last + 1
    member.each_message { |message| member.stop if message.payload == "m2" }
    # The coordinator no longer knows this member: its assignment is lost, revoked without a commit.
    mock_kafka.inject_errors(:heartbeat, :unknown_member_id)
    deadline = now + 10
    member.poll(100) until events.size.positive? || now > deadline # nothing to hand out: the revocation is answered
    produce(topic, %w[m3])

    expect(first_message(member, 10)&.payload).to eq("m3")
    seen = Array.new(events.size) { events.pop }
    expect(seen).to include(["consumer.offsets_left_behind", hash_including(lost: true, partitions: { topic => { 0 => resumed } })],
                            ["consumer.offsets_recovered", hash_including(partitions: { topic => { 0 => resumed } })])
  ensure
    member&.close
  end
end
