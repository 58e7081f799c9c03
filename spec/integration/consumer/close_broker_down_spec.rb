# frozen_string_literal: true

require "open3"

# close(timeout:) keeps its bound when the broker goes away under a group that
# just rebalanced: every wait inside close (the commit, the commit before the
# final revoke, leaving the group, librdkafka's teardown) takes what is left
# of the timeout, and close returns within timeout + 0.5 s. A broker of its
# own (bin/kafka on ports 9192-9197), stopped (SIGTERM) or killed (SIGKILL)
# while the consumers are members.
module CloseBrokerDown
  PORTS = { "KAFKA_PORT" => "9192", "KAFKA_CONTROLLER_PORT" => "9193", "KAFKA_SASL_PORT" => "9194",
            "KAFKA_SCRAM_PORT" => "9195", "KAFKA_SSL_PORT" => "9196", "KAFKA_SASL_SSL_PORT" => "9197" }.freeze
  BROKER = "127.0.0.1:9192"
  KAFKA = File.expand_path("../../../bin/kafka", __dir__)
  PID_FILE = File.expand_path("../../../tmp/kafka/9192/kafka.pid", __dir__)
  TIMEOUT = 2_000 # ms

  RSpec.describe "Consumer close with the broker gone", :kafka, timeout: 90 do
    def kafka(*args)
      out, status = Open3.capture2e(PORTS, KAFKA, *args)
      raise "bin/kafka #{args.join(" ")} failed:\n#{out}" unless status.success?
    end

    before { kafka("start") }
    after { kafka("stop") }

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

    # count consumers of one group, each reading its share of 600 messages on 6 partitions.
    def members_reading(count)
      topic = "sluice-spec-close-down"
      admin = Sluice::Admin.new do |config| # a broker started a moment ago: its first topic may take a while
        config.kafka = { "bootstrap.servers": BROKER }
        config.max_wait_timeout = 30_000
      end
      admin.create_topic(topic, partitions: 6)
      admin.close
      producer = build_producer(kafka: { "bootstrap.servers": BROKER })
      producer.produce_many_sync(Array.new(600) { |i| { topic: topic, partition: i % 6, payload: "m#{i}" } })
      group = "sluice-close-down-#{rand(1 << 30)}"
      consumers = Array.new(count) do
        Sluice::Consumer.new do |config|
          config.kafka = { "bootstrap.servers": BROKER, "group.id": group, "auto.offset.reset": "earliest" }
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
    def close_all(consumers)
      consumers.map do |consumer|
        Thread.new do
          at = now
          consumer.close(timeout: TIMEOUT)
          now - at
        end
      end.map(&:value)
    end

    # (A broker start is 10-15 s: one example per way to go, several consumers and one.)
    [["stopped (SIGTERM)", "TERM", 3], ["killed (SIGKILL)", "KILL", 1]].each do |how, signal, count|
      it "closes #{count} consumer(s) within timeout + 0.5 s when the broker was #{how}" do
        consumers, readers = members_reading(count)
        pid = Integer(File.read(PID_FILE))
        Process.kill(signal, pid)
        Timeout.timeout(30) { sleep 0.05 while (Process.kill(0, pid) rescue false) } # rubocop:disable Style/RescueModifier
        seconds = close_all(consumers)
        readers.each(&:join)
        RSpec.configuration.reporter.message("    broker #{how}, #{count} consumer(s): close took #{seconds.map { |s| s.round(2) }.join(", ")} s")
        expect(consumers).to all(be_closed)
        expect(seconds).to all(be <= (TIMEOUT / 1000.0) + 0.5)
      end
    end
  end
end
