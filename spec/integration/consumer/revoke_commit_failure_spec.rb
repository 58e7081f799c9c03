# frozen_string_literal: true

require "logger"

# Before partitions are revoked, what was processed on them is committed, so
# their next owner starts after it. When that commit fails (the coordinator
# unreachable, the member fenced: issue 55 saw "Waiting for coordinator" and
# illegal_generation there), the next owner reads those messages again, or,
# with auto.offset.reset: latest and nothing committed yet, skips them. It
# was reported as a commit_error only, which names neither the partitions
# nor the offsets; consumer.offsets_left_behind names both.
#
# librdkafka's mock cluster (made by the consumer, test.mock.num.brokers)
# refuses the revocation's OffsetCommit on demand.
no_mock = !Sluice::Native::TestHooks.respond_to?(:mock_push_request_errors) &&
          "librdkafka #{Sluice.librdkafka_version} was built without its mock cluster"
RSpec.describe "Consumer: a revocation's failed commit names what it left behind (mock cluster)", timeout: 60, skip: no_mock do
  offset_commit = 8 # Kafka's ApiKey
  illegal_generation = 22
  topic = "sluice-spec-mock-revoke"

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  def mock_consumer(events)
    consumer = Sluice::Consumer.new do |config|
      config.kafka = { "test.mock.num.brokers": 1, "group.id": "sluice-spec-mock-#{rand(1 << 30)}", "auto.offset.reset": "earliest",
                       "auto.commit.interval.ms": 600_000 } # only the revocation commits
      config.polling.mode = TestKafka::MODE
      config.logger = Logger.new(nil)
    end
    %w[consumer.partitions_revoked consumer.offsets_left_behind].each do |name|
      consumer.monitor.subscribe(name) { |event| events << [name, event.payload] }
    end
    consumer
  end

  def produce_to(bootstraps, topic, count)
    producer = Sluice::Producer.new do |config|
      config.kafka = { "bootstrap.servers": bootstraps }
      config.polling.mode = TestKafka::MODE
      config.logger = Logger.new(nil)
    end
    count.times { |i| producer.produce_sync(topic: topic, partition: 0, payload: "m#{i}") }
  ensure
    producer&.close
  end

  it "emits consumer.offsets_left_behind with the revoked partitions and the offsets not committed" do
    events = Queue.new
    consumer = mock_consumer(events)
    produce_to(Sluice::Native::TestHooks.mock_bootstraps(consumer.native), topic, 3)
    consumer.subscribe(topic)
    read = 0
    consumer.each_message do
      consumer.stop if (read += 1) == 3 # each_message stored offset 3 as the block returned
    end
    # The partition's start, committed as it was drained (the group had none),
    # is answered first: else the refusal meant for the revocation's commit
    # may go to it (under KIP-848 a commit waits for the member's epoch).
    deadline = now + 10
    sleep(0.05) until consumer.committed.dig(topic, 0).to_i >= 0 || now > deadline
    expect(consumer.committed.dig(topic, 0)).to eq(0)
    Sluice::Native::TestHooks.mock_push_request_errors(consumer.native, offset_commit, [illegal_generation])
    consumer.unsubscribe
    deadline = now + 20
    consumer.poll(100) until events.size >= 2 || now > deadline # the revocation is answered by a read

    seen = Array.new(events.size) { events.pop }
    left = seen.find { |name, _| name == "consumer.offsets_left_behind" }
    expect(left).not_to be_nil, "no consumer.offsets_left_behind among #{seen.inspect}"
    expect(left.last[:partitions]).to eq(topic => { 0 => 3 })
    expect(left.last[:error].code).to eq(:illegal_generation)
    expect(seen.map(&:first)).to eq(%w[consumer.offsets_left_behind consumer.partitions_revoked])
  ensure
    consumer&.close
  end
end
