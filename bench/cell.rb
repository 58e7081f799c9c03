# frozen_string_literal: true

# One benchmark cell in a fresh process: N producers in one polling mode, each
# producing M messages, measured from the first produce to the last delivery
# report. Prints one JSON line (bench/run.rb collects them; bin/demo prints it
# for people).
#
#   ruby bench/cell.rb --mode fd --producers 25 --messages 20000 [--variant async|many_sync|one_thread]
#
# Latency needs the moment each handle resolves; a small prepend on
# DeliveryHandle#resolve stamps it (one clock read per message, ~2% at 250k msg/s).

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "sluice"
require "json"
require "optparse"
require "etc"
require "objspace"

module Bench
  module StampResolve
    attr_reader :resolved_at

    def resolve(...)
      @resolved_at = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      super
    end
  end

  # Reads this process's memory and threads from /proc.
  module ProcSelf
    module_function

    def rss_kb = File.read("/proc/self/status")[/^VmRSS:\s+(\d+)/, 1].to_i
    def os_threads = Dir.children("/proc/self/task").size

    # CPU seconds of the native thread whose name starts with prefix (Ruby names native threads).
    def thread_cpu(prefix)
      Dir.children("/proc/self/task").sum do |tid|
        next 0 unless File.read("/proc/self/task/#{tid}/comm").start_with?(prefix)

        fields = File.read("/proc/self/task/#{tid}/stat").split(") ").last.split
        (fields[11].to_i + fields[12].to_i) / Etc.sysconf(Etc::SC_CLK_TCK).to_f
      rescue Errno::ENOENT
        0
      end
    end
  end

  class Cell
    def initialize(opts)
      @opts = opts
      @topic = opts[:topic]
      @size = opts[:size]
      @payload = ("x" * @size).freeze
    end

    def run
      Sluice::DeliveryHandle.prepend(StampResolve)
      ensure_topic
      rss_before = ProcSelf.rss_kb
      threads_before = Thread.list.size
      producers = Array.new(@opts[:producers]) { |i| build_producer(i) }
      producers.each { |p| p.produce_sync(topic: @topic, payload: @payload) } # connect + metadata
      rss_connected = ProcSelf.rss_kb
      ruby_threads = Thread.list.size - threads_before
      os_threads = ProcSelf.os_threads
      poller_cpu_before = ProcSelf.thread_cpu("sluice.poller")
      cpu_before = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
      started, stamps, handles = drive(producers)
      cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - cpu_before
      report(producers, started, stamps, handles, cpu,
             rss_before: rss_before, rss_connected: rss_connected, ruby_threads: ruby_threads, os_threads: os_threads,
             poller_cpu: ProcSelf.thread_cpu("sluice.poller") - poller_cpu_before)
    ensure
      producers&.each(&:close)
    end

    private

    def build_producer(index)
      Sluice::Producer.new do |config|
        config.id = "bench-#{index}"
        config.kafka = { "bootstrap.servers": @opts[:brokers] }.merge(@opts[:kafka])
        config.polling.mode = @opts[:mode]
        config.max_wait_timeout = 120_000
      end
    end

    def ensure_topic
      admin = Sluice::Native::Client.new([["bootstrap.servers", @opts[:brokers]]])
      admin.create_topics([[@topic, 1, nil]], 30_000)
      admin.destroy
    end

    # Returns [start time, produce stamps per producer, handles per producer].
    def drive(producers)
      count = @opts[:messages]
      gate = Queue.new
      stamps = Array.new(producers.size) { Array.new(count) }
      handles = Array.new(producers.size)
      started = nil
      if @opts[:variant] == "one_thread"
        started = now
        handles = producers.map { [] }
        count.times do |i|
          producers.each_with_index do |p, n|
            stamps[n][i] = now
            handles[n] << p.produce_async(topic: @topic, payload: @payload)
          end
        end
        handles.each { |list| list.each(&:wait) }
        return [started, stamps, handles]
      end

      threads = producers.each_with_index.map do |producer, n|
        Thread.new do
          gate.pop
          handles[n] = send(:"drive_#{@opts[:variant]}", producer, stamps[n], count)
        end
      end
      started = now
      producers.size.times { gate << true }
      threads.each(&:join)
      [started, stamps, handles]
    end

    def drive_async(producer, stamps, count)
      list = Array.new(count) do |i|
        stamps[i] = now
        producer.produce_async(topic: @topic, payload: @payload)
      end
      list.each(&:wait)
      list
    end

    def drive_many_sync(producer, stamps, count)
      batch = 1_000
      (0...count).step(batch).flat_map do |first|
        messages = Array.new([batch, count - first].min) { { topic: @topic, payload: @payload } }
        t = now
        messages.size.times { |i| stamps[first + i] = t }
        producer.produce_many_async(messages).each(&:wait)
      end
    end

    def report(producers, started, stamps, handles, cpu, **extra)
      all = handles.flatten
      latencies = []
      stamps.each_with_index { |list, n| list.each_with_index { |t, i| latencies << (handles[n][i].resolved_at - t) } }
      latencies.sort!
      finished = all.map(&:resolved_at).max
      errors = all.count { |h| h.report.error }
      messages = all.size
      {
        mode: @opts[:mode], variant: @opts[:variant], producers: producers.size, messages_per_producer: @opts[:messages],
        delivered: messages - errors, errors: errors, elapsed_s: (finished - started).round(4),
        rate: (messages / (finished - started)).round, cpu_us_per_msg: (cpu / messages * 1e6).round(2),
        p50_ms: (percentile(latencies, 0.50) * 1000).round(2), p99_ms: (percentile(latencies, 0.99) * 1000).round(2),
        ruby_threads: extra[:ruby_threads], os_threads: extra[:os_threads],
        rss_before_kb: extra[:rss_before], rss_connected_kb: extra[:rss_connected], rss_after_kb: ProcSelf.rss_kb,
        poller_cpu_s: extra[:poller_cpu].round(3), poller_stats: poller_stats,
        handle_bytes: handle_bytes(all.first),
        ruby: RUBY_VERSION, librdkafka: Sluice::Native.librdkafka_version
      }
    end

    def poller_stats
      return nil unless @opts[:mode] == :fd

      Sluice::Polling::Poller.instance.stats
    end

    # A pending handle: the object plus its slot in the native in-flight table (8 + 4 bytes).
    def handle_bytes(handle)
      ObjectSpace.memsize_of(handle) + 12
    end

    def percentile(sorted, q) = sorted.empty? ? 0 : sorted[((sorted.size - 1) * q).round]
    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end

if $PROGRAM_NAME == __FILE__
  opts = { mode: :fd, producers: 1, messages: 20_000, size: 100, variant: "async", topic: "sluice-bench",
           brokers: ENV.fetch("KAFKA_BROKERS", "127.0.0.1:9092"), kafka: {} }
  OptionParser.new do |o|
    o.on("--mode MODE", %w[fd thread]) { |v| opts[:mode] = v.to_sym }
    o.on("--producers N", Integer) { |v| opts[:producers] = v }
    o.on("--messages M", Integer) { |v| opts[:messages] = v }
    o.on("--size BYTES", Integer) { |v| opts[:size] = v }
    o.on("--variant V", %w[async many_sync one_thread]) { |v| opts[:variant] = v }
    o.on("--topic NAME") { |v| opts[:topic] = v }
    o.on("-X KEY=VALUE", "a librdkafka property") { |v| k, val = v.split("=", 2); opts[:kafka][k.to_sym] = val }
    o.on("--human", "print a summary for people instead of JSON") { opts[:human] = true }
  end.parse!
  result = Bench::Cell.new(opts).run
  if opts[:human]
    puts format("sluice %<v>s, Ruby %<ruby>s, librdkafka %<lib>s, broker %<b>s, topic %<t>s",
                v: Sluice::VERSION, ruby: result[:ruby], lib: result[:librdkafka], b: opts[:brokers], t: opts[:topic])
    puts format("mode %<mode>s, %<producers>d producers x %<n>d messages of %<size>d bytes (%<variant>s)",
                mode: result[:mode], producers: result[:producers], n: result[:messages_per_producer], size: opts[:size],
                variant: result[:variant])
    puts format("delivered %<delivered>d, failed %<errors>d, in %<elapsed>.3f s: %<rate>d msg/s",
                delivered: result[:delivered], errors: result[:errors], elapsed: result[:elapsed_s], rate: result[:rate])
    puts format("polling threads %<rt>d (Ruby), OS threads %<ot>d, CPU %<cpu>.2f us/msg, latency p50 %<p50>.1f ms p99 %<p99>.1f ms",
                rt: result[:ruby_threads], ot: result[:os_threads], cpu: result[:cpu_us_per_msg], p50: result[:p50_ms],
                p99: result[:p99_ms])
    exit(result[:errors].zero? ? 0 : 1)
  else
    puts JSON.generate(result)
  end
end
