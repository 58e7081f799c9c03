# frozen_string_literal: true

# One benchmark cell in a fresh process: N producers in one polling mode, each
# producing M messages, measured from the first produce to the last delivery
# report. Prints one JSON line (bench/run.rb collects them; bin/demo prints it
# for people).
#
#   ruby bench/cell.rb --mode fd --producers 25 --messages 20000 [--variant async|many_async|many_sync|one_thread]
#
# Throughput is measured on a burst nobody observes. Latency (produce call ->
# delivery report dispatched) is measured on a second burst of the same size
# with a message.acknowledged subscriber stamping each delivery, which costs
# the poller an event per message.

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "sluice"
require "json"
require "optparse"
require "etc"
require "objspace"

module Bench
  # Reads this process's memory and threads from /proc.
  module ProcSelf
    module_function

    def rss_kb = File.read("/proc/self/status")[/^VmRSS:\s+(\d+)/, 1].to_i
    def os_threads = Dir.children("/proc/self/task").size

    # CPU seconds per thread group: librdkafka's ("rdk:*"), our pollers
    # ("sluice.*"), and the rest (the Ruby threads driving the producers).
    def cpu_by_group
      each_thread.each_with_object(Hash.new(0.0)) do |(comm, seconds), acc|
        group = if comm.start_with?("rdk:")
                  :librdkafka
                elsif comm.start_with?("sluice.")
                  :polling
                else
                  :ruby
                end
        acc[group] += seconds
      end
    end

    # CPU seconds of the native threads whose name starts with prefix (Ruby names native threads).
    def thread_cpu(prefix) = each_thread.sum { |comm, seconds| comm.start_with?(prefix) ? seconds : 0 }

    # [name, CPU seconds] of every live thread; schedstat counts nanoseconds
    # (stat's clock ticks are 10 ms: too coarse for a 20 ms burst).
    def each_thread
      Dir.children("/proc/self/task").filter_map do |tid|
        [File.read("/proc/self/task/#{tid}/comm").strip, File.read("/proc/self/task/#{tid}/schedstat").split.first.to_i / 1e9]
      rescue Errno::ENOENT
        nil
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
      ensure_topic
      rss_before = ProcSelf.rss_kb
      threads_before = Thread.list.size
      producers = Array.new(@opts[:producers]) { |i| build_producer(i) }
      producers.each { |p| p.produce_sync(topic: @topic, payload: @payload) } # connect + metadata
      rss_connected = ProcSelf.rss_kb
      ruby_threads = Thread.list.size - threads_before
      os_threads = ProcSelf.os_threads
      poller_cpu_before = ProcSelf.thread_cpu("sluice.poller")
      stats_before = poller_stats
      cpu_before = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
      groups_before = ProcSelf.cpu_by_group
      @enqueued = Array.new(producers.size)
      started, _, handles = drive(producers)
      finished = now
      enqueue_s = @enqueued.compact.max&.-(started)
      cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - cpu_before
      groups = ProcSelf.cpu_by_group.to_h { |group, seconds| [group, seconds - groups_before[group]] }
      poller_cpu = ProcSelf.thread_cpu("sluice.poller") - poller_cpu_before
      stats = stats_before && poller_stats.to_h { |k, v| [k, v - stats_before[k]] }
      latencies = latency_burst(producers)
      report(producers, finished - started, latencies, handles, cpu, groups,
             rss_before: rss_before, rss_connected: rss_connected, ruby_threads: ruby_threads, os_threads: os_threads,
             poller_cpu: poller_cpu, poller_stats: stats, enqueue_s: enqueue_s)
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
      admin = Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": @opts[:brokers] } }
      admin.create_topic(@topic)
    rescue Sluice::Errors::TopicAlreadyExistsError
      nil
    ensure
      admin&.close
    end

    # Returns [start time, produce stamps per producer, handles per producer].
    def drive(producers)
      count = @opts[:messages]
      gate = Queue.new
      stamps = Array.new(producers.size) { Array.new(count) }
      handles = Array.new(producers.size)
      if @opts[:variant] == "one_thread"
        started = now
        handles = producers.map { [] }
        count.times do |i|
          producers.each_with_index do |p, n|
            stamps[n][i] = now
            handles[n] << p.produce_async(message(n, i))
          end
        end
        handles.each { |list| list.each(&:wait) }
        return [started, stamps, handles]
      end

      threads = producers.each_with_index.map do |producer, n|
        Thread.new do
          gate.pop
          handles[n] = send(:"drive_#{@opts[:variant]}", producer, n, stamps[n], count)
        end
      end
      started = now
      producers.size.times { gate << true }
      threads.each(&:join)
      [started, stamps, handles]
    end

    def drive_async(producer, n, stamps, count)
      list = Array.new(count) do |i|
        stamps[i] = now
        producer.produce_async(message(n, i))
      end
      @enqueued[n] = now
      list.each(&:wait)
      list
    end

    def drive_many_sync(producer, n, stamps, count) = batches(n, stamps, count) { |messages| producer.produce_many_sync(messages) }

    def drive_many_async(producer, n, stamps, count)
      list = batches(n, stamps, count) { |messages| producer.produce_many_async(messages) }
      @enqueued[n] = now
      list.each(&:wait)
      list
    end

    # The producer's messages in batches of 1,000, each stamped when its call starts.
    def batches(n, stamps, count)
      batch = 1_000
      (0...count).step(batch).flat_map do |first|
        messages = Array.new([batch, count - first].min) { |i| message(n, first + i) }
        t = now
        messages.size.times { |i| stamps[first + i] = t }
        yield messages
      end
    end

    # A second burst, observed: each delivery stamped by a message.acknowledged
    # subscriber. @return [Array<Float>] sorted latencies in seconds
    def latency_burst(producers)
      delivered_at = {}
      producers.each { |p| p.monitor.subscribe("message.acknowledged") { |e| delivered_at[e[:label]] = now } }
      @label = true
      _, stamps, = drive(producers)
      producers.each(&:flush) # handles resolve before their acknowledgement callbacks run
      stamps.each_with_index.flat_map do |list, n|
        list.each_with_index.map { |t, i| delivered_at.fetch([n, i]) - t }
      end.sort
    ensure
      @label = false
    end

    def report(producers, elapsed, latencies, handles, cpu, groups, **extra)
      all = handles.flatten
      errors = all.count(&:error)
      messages = all.size
      {
        mode: @opts[:mode], variant: @opts[:variant], producers: producers.size, messages_per_producer: @opts[:messages],
        delivered: messages - errors, errors: errors, elapsed_s: elapsed.round(4),
        rate: (messages / elapsed).round, cpu_us_per_msg: (cpu / messages * 1e6).round(2),
        # Ruby-side CPU: the threads driving producers plus the polling threads (not librdkafka's)
        ruby_cpu_us_per_msg: ((groups[:ruby] + groups[:polling]) / messages * 1e6).round(2),
        # librdkafka's share is the rest of the process CPU: its threads come and go
        cpu_us_per_msg_by_group: { ruby: groups[:ruby], polling: groups[:polling],
                                   librdkafka: cpu - groups[:ruby] - groups[:polling] }
          .transform_values { |s| (s / messages * 1e6).round(2) },
        # async variants: messages per second handed to librdkafka, until the last produce call returned
        enqueue_rate: extra[:enqueue_s]&.positive? ? (messages / extra[:enqueue_s]).round : nil,
        p50_ms: (percentile(latencies, 0.50) * 1000).round(2), p99_ms: (percentile(latencies, 0.99) * 1000).round(2),
        ruby_threads: extra[:ruby_threads], os_threads: extra[:os_threads],
        rss_before_kb: extra[:rss_before], rss_connected_kb: extra[:rss_connected], rss_after_kb: ProcSelf.rss_kb,
        # the measured burst only: poller thread CPU and its counters
        poller_cpu_s: extra[:poller_cpu].round(3), poller_stats: extra[:poller_stats],
        poller_us_per_wakeup: extra[:poller_stats] && (extra[:poller_cpu] * 1e6 / [extra[:poller_stats][:wakeups], 1].max).round(1),
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

    # The Hash a user would pass; labelled only in the latency burst.
    def message(producer_index, index)
      return { topic: @topic, payload: @payload } unless @label

      { topic: @topic, payload: @payload, label: [producer_index, index] }
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
    o.on("--variant V", %w[async many_async many_sync one_thread]) { |v| opts[:variant] = v }
    o.on("--topic NAME") { |v| opts[:topic] = v }
    o.on("-X KEY=VALUE", "a librdkafka property") do |v|
      k, val = v.split("=", 2)
      opts[:kafka][k.to_sym] = val
    end
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
