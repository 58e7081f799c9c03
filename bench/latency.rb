# frozen_string_literal: true

# End-to-end latency, produce -> consume, at a paced load: 25 producers in one
# process each send 400 msg/s for 20 s (10,000 msg/s in all) into a fresh
# 6-partition topic; a sluice consumer in another process reads them and
# measures, per message, the time from just before produce_async to the
# moment each_message hands it out (both clocks CLOCK_REALTIME on this host).
#
#   ruby bench/latency.rb [--modes fd,thread] [--producers 25] [--rate 400] [--seconds 20] [--json] [--no-write]
#
# Prints p50 / p90 / p99 / p99.9 / max in ms and what was lost (should be 0)
# for each polling mode of the producers, and writes them as the "latency"
# block of bench/RESULTS.md. bench/run.rb does not run it: bin/bench latency does.

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "sluice"
require "json"
require "optparse"
require "rbconfig"
require_relative "environment"

module Bench
  # The consuming side, in its own process: one consumer, :fd, each_message.
  class LatencyConsumer
    def initialize(opts)
      @opts = opts
    end

    def run
      latencies = []
      consumer = Sluice::Consumer.new do |config|
        config.kafka = { "bootstrap.servers": @opts[:brokers], "group.id": "sluice-bench-latency-#{Process.pid}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": false }
        config.logger = Logger.new(nil)
      end
      # The producers start once the partitions are assigned: a message sent
      # during the group join would count the join as latency.
      consumer.monitor.subscribe("consumer.partitions_assigned") do
        $stdout.puts("ready")
        $stdout.flush
      end
      consumer.subscribe(@opts[:topic])
      deadline = now + @opts[:seconds] + 60
      watchdog = Thread.new do
        sleep(0.5) while now < deadline && latencies.size < @opts[:expect]
        consumer.stop
      end
      consumer.each_message do |message|
        sent_us = message.headers["sent_us"]
        latencies << (Process.clock_gettime(Process::CLOCK_REALTIME, :microsecond) - Integer(sent_us)) if sent_us
        consumer.stop if latencies.size >= @opts[:expect]
      end
      watchdog.kill
      consumer.close
      $stdout.puts(JSON.generate(latencies_us: latencies))
    end

    private

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # The producing side: the topic, the consumer process, the paced producers, the summary.
  class Latency
    PARTITIONS = 6

    def initialize(opts)
      @opts = opts
      @topic = "sluice-bench-latency-#{Process.pid}-#{opts[:mode]}-#{Time.now.to_i}"
      @total = opts[:producers] * opts[:rate] * opts[:seconds]
    end

    def run
      create_topic
      reader = start_consumer
      producers = Array.new(@opts[:producers]) { |i| producer(i) }
      failed = pace(producers)
      producers.each(&:close)
      latencies = JSON.parse(reader.read.lines.last)["latencies_us"]
      reader.close
      summary(latencies, failed)
    end

    private

    def create_topic
      admin = Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": @opts[:brokers] } }
      admin.create_topic(@topic, partitions: PARTITIONS)
    rescue Sluice::Errors::TopicAlreadyExistsError
      nil
    ensure
      admin&.close
    end

    def start_consumer
      args = [RbConfig.ruby, __FILE__, "--role", "consumer", "--topic", @topic, "--expect", @total.to_s,
              "--seconds", @opts[:seconds].to_s, "--brokers", @opts[:brokers]]
      reader = IO.popen(args)
      line = reader.gets
      raise "the consumer process did not start: #{line.inspect}" unless line&.strip == "ready"

      reader
    end

    def producer(index)
      Sluice::Producer.new do |config|
        config.kafka = { "bootstrap.servers": @opts[:brokers] }
        config.id = "latency-#{index}"
        config.polling.mode = @opts[:mode]
        config.logger = Logger.new(nil)
      end
    end

    # Sends message n when its time has come (n / total rate after the start),
    # round-robin over the producers: each sends at its own steady rate.
    # @return [Integer] deliveries that failed
    def pace(producers)
      rate = @opts[:producers] * @opts[:rate]
      handles = []
      started = now
      @total.times do |n|
        due = started + (n.to_f / rate)
        (wait = due - now).positive? && sleep(wait)
        headers = { "sent_us" => Process.clock_gettime(Process::CLOCK_REALTIME, :microsecond).to_s }
        handles << producers[n % producers.size].produce_async(topic: @topic, payload: "x" * 100, headers: headers)
      end
      handles.count { |handle| handle.wait(max_wait_timeout: 30_000, raise_response_error: false).error }
    end

    def summary(latencies_us, failed)
      sorted = latencies_us.sort
      pick = ->(q) { sorted.empty? ? nil : (sorted[[(q * sorted.size).ceil - 1, 0].max] / 1000.0).round(2) }
      {
        mode: @opts[:mode], producers: @opts[:producers], rate_per_producer: @opts[:rate], seconds: @opts[:seconds],
        sent: @total, received: sorted.size, failed: failed, lost: @total - failed - sorted.size,
        p50_ms: pick.call(0.50), p90_ms: pick.call(0.90), p99_ms: pick.call(0.99), p999_ms: pick.call(0.999),
        max_ms: sorted.empty? ? nil : (sorted.last / 1000.0).round(2),
        librdkafka: Sluice.librdkafka_version, ruby: RUBY_VERSION
      }
    end

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end

module Bench
  # The latency runs of each mode, printed and written into RESULTS.md.
  module LatencyReport
    extend Environment

    def self.line(result)
      format("latency %s, %d producers x %d msg/s for %d s: p50 %.2f ms, p90 %.2f, p99 %.2f, p99.9 %.2f, max %.2f; " \
             "sent %d, received %d, failed %d, lost %d (librdkafka %s)",
             result[:mode], result[:producers], result[:rate_per_producer], result[:seconds], result[:p50_ms],
             result[:p90_ms], result[:p99_ms], result[:p999_ms], result[:max_ms], result[:sent], result[:received],
             result[:failed], result[:lost], result[:librdkafka])
    end

    def self.write(results, argv)
      first = results.first
      rows = results.map do |r|
        format("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %d | %d |", r[:mode], r[:p50_ms], r[:p90_ms], r[:p99_ms], r[:p999_ms], r[:max_ms],
               r[:sent], r[:lost])
      end
      write_block("latency", <<~MD)
        ## End-to-end latency

        Generated by `bin/bench latency#{argv.empty? ? "" : " #{argv.join(" ")}"}` on #{Time.now.utc.strftime("%Y-%m-%d %H:%M UTC")} (librdkafka #{first[:librdkafka]}).
        #{first[:producers]} producers in one process, each paced at #{first[:rate_per_producer]} msg/s for #{first[:seconds]} s,
        into a 6-partition topic; one sluice consumer (`:fd`, `each_message`) in another process. Latency is
        from just before `produce_async` to the moment `each_message` hands the message out (producer
        defaults: `linger.ms` 5). One run per mode of the producers; the machine is shared and noisy.

        | producers' mode | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | sent | lost |
        |---|---:|---:|---:|---:|---:|---:|---:|
        #{rows.join("\n")}
      MD
    end
  end
end

if $PROGRAM_NAME == __FILE__
  argv = ARGV.dup
  opts = { role: "producers", modes: %i[fd thread], producers: 25, rate: 400, seconds: 20, json: false, write: true,
           brokers: ENV.fetch("KAFKA_BROKERS", "127.0.0.1:9092") }
  OptionParser.new do |o|
    o.on("--role ROLE", %w[producers consumer]) { |v| opts[:role] = v }
    o.on("--mode MODE", %w[fd thread], "one mode only") { |v| opts[:modes] = [v.to_sym] }
    o.on("--modes LIST", Array, "the producers' polling modes (default fd,thread)") { |v| opts[:modes] = v.map(&:to_sym) }
    o.on("--producers N", Integer) { |v| opts[:producers] = v }
    o.on("--rate N", Integer, "messages per second per producer") { |v| opts[:rate] = v }
    o.on("--seconds S", Integer) { |v| opts[:seconds] = v }
    o.on("--topic NAME") { |v| opts[:topic] = v }
    o.on("--expect N", Integer) { |v| opts[:expect] = v }
    o.on("--brokers B") { |v| opts[:brokers] = v }
    o.on("--json") { opts[:json] = true }
    o.on("--no-write", "leave bench/RESULTS.md alone") { opts[:write] = false }
  end.parse!
  if opts[:role] == "consumer"
    Bench::LatencyConsumer.new(opts).run
  else
    results = opts[:modes].map do |mode|
      result = Bench::Latency.new(opts.merge(mode: mode)).run
      puts opts[:json] ? JSON.generate(result) : Bench::LatencyReport.line(result)
      result
    end
    Bench::LatencyReport.write(results, argv) if opts[:write]
  end
end
