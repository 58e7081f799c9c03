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

  # The process's CPU time over a window in which nothing of ours runs: what a closed client's teardown
  # still burns (the sleep is the window measured, not a wait for something).
  def cpu_seconds_over(seconds)
    before = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
    sleep seconds
    Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - before
  end

  # A close that timed out leaves librdkafka's teardown to go on in the background until the group can be
  # left, which needs the broker back. Its main thread spun meanwhile, a core per consumer (librdkafka's timers
  # stop while terminating; the bundled build's patch 0017): 19.6 s of CPU in 10 s for three, and the broker
  # the next example started took 40-50 s instead of 10 beside them. The system's 2.0.2 lacks the patch.
  spins = ENV["SLUICE_USE_SYSTEM_LIBRDKAFKA"] == "1"

  # (A broker start is 6-10 s: one example per way to go, several consumers and one.)
  [["stopped (SIGTERM)", "TERM", 3], ["killed (SIGKILL)", "KILL", 1]].each do |how, signal, count|
    it "closes #{count} consumer(s) within timeout + 0.5 s when the broker was #{how}, and their teardown does not spin" do
      consumers, readers = members_reading(count)
      OwnBroker.signal(signal)
      seconds = close_all(consumers, timeout_ms)
      readers.each(&:join)
      busy = cpu_seconds_over(2)
      RSpec.configuration.reporter.message("    broker #{how}, #{count} consumer(s): close took #{seconds.map { |s| s.round(2) }.join(", ")} s, " \
                                           "then #{busy.round(2)} s of CPU in 2 s")
      expect(consumers).to all(be_closed)
      seconds.each { |took| expect_elapsed(took, within: (timeout_ms / 1000.0) + 0.5, guards: "a close past its 2 s timeout on a broker #{how}") }
      expect(busy).to be < 1.0, "the closed consumers' teardown took #{busy.round(2)} s of CPU in 2 s: librdkafka's main thread spins" unless spins
    end
  end
end
