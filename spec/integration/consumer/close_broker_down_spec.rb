# frozen_string_literal: true

# close(timeout:) keeps its bound when the broker goes away under a group that
# just rebalanced: every wait inside close (the commit, the commit before the
# final revoke, leaving the group, librdkafka's teardown) takes what is left
# of the timeout, and close returns within timeout + 0.5 s. A broker of the
# spec's own (OwnBroker), stopped (SIGTERM) or killed (SIGKILL) while the
# consumers are members.
RSpec.describe "Consumer close with the broker gone", :kafka, :own_broker, timeout: 90 do
  timeout_ms = 2_000

  before { OwnBroker.start }
  after { OwnBroker.stop }

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # count consumers of one group, each reading its share of 600 messages on 6 partitions.
  def members_reading(count)
    topic = "sluice-spec-close-down"
    OwnBroker.create_topic(topic, partitions: 6)
    producer = build_producer(kafka: { "bootstrap.servers": OwnBroker::BROKERS })
    producer.produce_many_sync(Array.new(600) { |i| { topic: topic, partition: i % 6, payload: "m#{i}" } })
    group = "sluice-close-down-#{rand(1 << 30)}"
    consumers = Array.new(count) do
      Sluice::Consumer.new do |config|
        config.kafka = { "bootstrap.servers": OwnBroker::BROKERS, "group.id": group, "auto.offset.reset": "earliest" }
        config.polling.mode = TestKafka::MODE
        config.logger = Logger.new(nil)
      end
    end
    consumers.each { |consumer| consumer.subscribe(topic) }
    read = Queue.new
    readers = consumers.map { |consumer| Thread.new { consumer.each_message { read << 1 } } }
    600.times { pop_within(read, 30) } # every member joined (a rebalance each) and read; offsets stored
    [consumers, readers]
  end

  # Closes them all at once; @return [Array<Float>] each close's seconds
  def close_all(consumers, timeout_ms)
    consumers.map do |consumer|
      Thread.new do
        at = now
        consumer.close(timeout: timeout_ms)
        now - at
      end
    end.map(&:value)
  end

  # (A broker start is 10-15 s: one example per way to go, several consumers and one.)
  [["stopped (SIGTERM)", "TERM", 3], ["killed (SIGKILL)", "KILL", 1]].each do |how, signal, count|
    it "closes #{count} consumer(s) within timeout + 0.5 s when the broker was #{how}" do
      consumers, readers = members_reading(count)
      OwnBroker.signal(signal)
      seconds = close_all(consumers, timeout_ms)
      readers.each(&:join)
      RSpec.configuration.reporter.message("    broker #{how}, #{count} consumer(s): close took #{seconds.map { |s| s.round(2) }.join(", ")} s")
      expect(consumers).to all(be_closed)
      seconds.each { |took| expect_elapsed(took, within: (timeout_ms / 1000.0) + 0.5, guards: "a close past its 2 s timeout on a broker #{how}") }
    end
  end
end
