# frozen_string_literal: true

# What a wide consumer's statistics cost the other clients of the process
# (issue 44, item 2): a consumer assigned every partition of a 2,000-partition
# topic, with statistics.interval.ms 1000 (about 3 MB of JSON a second), beside
# a producer that sends one message at a time with produce_sync. Three cells in
# one run, the producer's produce_sync latency in each:
#
# - off: no statistics;
# - on: statistics, no listener (nothing parsed);
# - listened: statistics with a listener that turns them into metrics
#   (Instrumentation::Metrics, what the Prometheus and StatsD listeners do).
#
# The goal: listened's p99 within 1.5x of off's. Parsing and listeners run
# on the sluice.statistics thread, not the poller.
#
#   ruby bench/statistics.rb [--partitions 2000] [--seconds 15] [--mode fd]
#
# bin/bench statistics starts a local broker unless KAFKA_BROKERS is set.

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "sluice"
require "optparse"
require "securerandom"

module Bench
  # One cell: the consumer (statistics as asked) and the producer measured beside it.
  class StatisticsCell
    def initialize(opts, topic, name)
      @opts = opts
      @topic = topic
      @name = name
    end

    # @return [Hash] the cell's latencies (ms) and how many emissions the listener saw
    def run
      heard = 0
      consumer = build_consumer
      if @name == :listened
        metrics = Sluice::Instrumentation::Metrics.new
        consumer.monitor.subscribe("statistics.emitted") do |event|
          metrics.statistics(event)
          heard += 1
        end
      end
      consumer.assign(@topic => Array.new(@opts[:partitions]) { |p| p })
      reader = Thread.new { consumer.each_message { nil } }
      latencies = measure_producer
      { cell: @name, heard: heard, **percentiles(latencies) }
    ensure
      consumer&.stop
      reader&.join
      consumer&.close
    end

    private

    def build_consumer
      statistics = @name == :off ? {} : { "statistics.interval.ms": 1_000 }
      Sluice::Consumer.new do |config|
        config.kafka = { "bootstrap.servers": @opts[:brokers], "group.id": "sluice-bench-statistics-#{SecureRandom.hex(4)}",
                         "enable.auto.commit": false, **statistics }
        config.polling.mode = @opts[:mode]
        config.logger = Logger.new(nil)
      end
    end

    def measure_producer
      producer = Sluice::Producer.new do |config|
        config.kafka = { "bootstrap.servers": @opts[:brokers], "linger.ms": 0 }
        config.polling.mode = @opts[:mode]
        config.logger = Logger.new(nil)
      end
      producer.produce_sync(topic: "#{@topic}-probe", payload: "warm-up")
      latencies = []
      deadline = Bench.now + @opts[:seconds]
      while Bench.now < deadline
        started = Bench.now
        producer.produce_sync(topic: "#{@topic}-probe", payload: "probe")
        latencies << (Bench.now - started) * 1000
      end
      latencies
    ensure
      producer&.close
    end

    def percentiles(latencies)
      sorted = latencies.sort
      at = ->(q) { sorted[[(sorted.size * q).ceil - 1, 0].max].round(1) }
      { count: sorted.size, p50: at[0.5], p99: at[0.99], max: sorted.last.round(1) }
    end
  end

  def self.now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  opts = { brokers: ENV.fetch("KAFKA_BROKERS", "127.0.0.1:9092"), partitions: 2_000, seconds: 15, mode: :fd }
  OptionParser.new do |o|
    o.on("--partitions N", Integer) { |v| opts[:partitions] = v }
    o.on("--seconds S", Float) { |v| opts[:seconds] = v }
    o.on("--mode MODE", %w[fd thread]) { |v| opts[:mode] = v.to_sym }
  end.parse!

  topic = "sluice-bench-statistics-#{opts[:partitions]}"
  admin = Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": opts[:brokers] } }
  existing = admin.topics
  admin.create_topic(topic, partitions: opts[:partitions]) unless existing.include?(topic)
  admin.create_topic("#{topic}-probe") unless existing.include?("#{topic}-probe")
  admin.close

  puts "statistics beside a producer: a consumer of #{opts[:partitions]} partitions, statistics.interval.ms 1000, " \
       "#{opts[:seconds]} s of produce_sync per cell, #{opts[:mode]} mode"
  puts "| cell | produce_sync | p50 ms | p99 ms | max ms | emissions heard |"
  puts "|---|---|---|---|---|---|"
  rows = %i[off on listened].map do |name|
    StatisticsCell.new(opts, topic, name).run.tap do |row|
      puts "| #{row[:cell]} | #{row[:count]} | #{row[:p50]} | #{row[:p99]} | #{row[:max]} | #{row[:heard]} |"
    end
  end
  off, _, listened = rows
  puts format("listened p99 / off p99: %.2fx (goal: at most 1.5x)", listened[:p99] / off[:p99])
end
