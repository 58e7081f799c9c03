# frozen_string_literal: true

# Failure policies (issue 56): each_message(concurrency: 64, ordering: :key)
# over --messages keyed messages (1,000 keys, 6 partitions) with a block that
# waits 5 ms (an I/O call), once with no failure and once with 1% poison
# messages that raise on every attempt: retries: { attempts: 3, backoff:
# 0.01..0.1 }, then dead_letter:. Prints messages per second of each run
# (time from the read's start until every message finished or was
# dead-lettered) and the counts of consumer.retry and consumer.dead_lettered.
#
#   ruby bench/failures.rb [--messages 20000] [--mode fd|thread] [--brokers 127.0.0.1:9092]

require "optparse"
require "securerandom"
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "sluice"

module Bench
  class Failures
    TOPIC = "sluice-bench-failures"
    DLQ = "sluice-bench-failures-dlq"
    PARTITIONS = 6
    KEYS = 1_000
    WAIT = 0.005
    POISON_RATE = 0.01

    def initialize(opts)
      @opts = opts
      @topic = "#{TOPIC}-#{SecureRandom.hex(3)}" # fresh each run: both reads see exactly this run's messages
    end

    def run
      prepare
      at_exit { admin { |admin| admin.delete_topic(@topic) } }
      puts format("%-9s %8s %8s %10s %8s %12s", "run", "messages", "seconds", "msg/s", "retries", "dead letters")
      [[:clean, nil], [:poison, { retries: { attempts: 3, backoff: 0.01..0.1 }, dead_letter: DLQ }]].each do |name, policy|
        puts format("%-9s %8d %8.2f %10.0f %8d %12d", name, *read(name == :poison, policy || {}))
      end
    end

    private

    def prepare
      admin do |admin|
        [@topic, DLQ].each do |topic|
          admin.create_topic(topic, partitions: PARTITIONS)
        rescue Sluice::Errors::TopicAlreadyExistsError
          nil
        end
      end
      producer = Sluice::Producer.new { |config| config.kafka = { "bootstrap.servers": @opts[:brokers], "linger.ms": 5 } }
      # Poison drawn apart from the key (a key's messages are not all poison), the same draw every run.
      random = Random.new(56)
      @opts[:messages].times.each_slice(5_000) do |slice|
        producer.produce_many_sync(slice.map do |i|
                                     { topic: @topic, key: "k#{i % KEYS}", payload: "#{random.rand < POISON_RATE ? "P" : "o"}#{"x" * 100}" }
                                   end)
      end
      producer.close
    end

    # @return [Array(Integer, Float, Float, Integer, Integer)] messages, seconds, msg/s, retries, dead letters
    def read(poison, policy)
      @finished_at = nil
      monitor = Sluice::Monitor.new
      consumer = new_consumer(monitor)
      counts = Hash.new(0)
      lock = Mutex.new
      monitor.subscribe("consumer.retry") { lock.synchronize { counts[:retries] += 1 } }
      monitor.subscribe("consumer.dead_lettered") do
        lock.synchronize { counts[:dead] += 1 }
        done(consumer, counts, lock)
      end
      started = now
      consumer.each_message(concurrency: 64, ordering: :key, **policy) do |message|
        sleep WAIT
        raise "poison #{message.offset}" if poison && message.payload.start_with?("P")

        lock.synchronize { counts[:ok] += 1 }
        done(consumer, counts, lock)
      end
      seconds = (@finished_at || now) - started
      consumer.close
      total = counts[:ok] + counts[:dead]
      [total, seconds, total / seconds, counts[:retries], counts[:dead]]
    end

    # The last message finished (or was dead-lettered): the time stops here, not when each_message returned.
    def done(consumer, counts, lock)
      return unless lock.synchronize { counts[:ok] + counts[:dead] } >= @opts[:messages]

      @finished_at ||= now
      consumer.stop
    end

    def new_consumer(monitor)
      consumer = Sluice::Consumer.new do |config|
        config.monitor = monitor
        config.kafka = { "bootstrap.servers": @opts[:brokers], "group.id": "sluice-bench-failures-#{SecureRandom.hex(4)}",
                         "auto.offset.reset": "earliest" }
        config.polling.mode = @opts[:mode]
      end
      consumer.subscribe(@topic)
      consumer
    end

    def admin
      admin = Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": @opts[:brokers] } }
      yield admin
    ensure
      admin&.close
    end

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end

opts = { messages: 20_000, mode: :fd, brokers: ENV.fetch("KAFKA_BROKERS", "127.0.0.1:9092") }
OptionParser.new do |o|
  o.on("--messages N", Integer) { |v| opts[:messages] = v }
  o.on("--mode MODE", %w[fd thread]) { |v| opts[:mode] = v.to_sym }
  o.on("--brokers LIST") { |v| opts[:brokers] = v }
end.parse!
Bench::Failures.new(opts).run
