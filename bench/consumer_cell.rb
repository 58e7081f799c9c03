# frozen_string_literal: true

# One consumer benchmark measurement in a fresh process; prints one JSON line
# (bench/consumer_run.rb collects them).
#
#   ruby bench/consumer_cell.rb --consumers 3 --mode fd --api each_batch|each_message|poll|poll_store_offset|poll_store|poll_store_config
#                               [--runner thread|fiber] [--messages 1000000]
#     (poll: poll alone; poll_store_offset: poll and store_offset(message); poll_store: poll(store: true);
#      poll_store_config: poll with config.poll_store = true)
#   ruby bench/consumer_cell.rb --scenario crowd --mode fd --runner fiber   # 25 consumers + 25 producers, thread counts
#   ruby bench/consumer_cell.rb --scenario idle --mode fd --seconds 10      # wake-ups of an idle consumer
#   ruby bench/consumer_cell.rb --scenario watermarks --topic T             # partitions and messages of T
#   ruby bench/consumer_cell.rb --scenario processes --processes 3 --api each_batch [--launch fork|spawn]
#                                                  # 3 processes, one consumer each, one group (bench/consumer_processes.rb)
#
# Throughput: N consumers in one fresh group read a pre-filled topic, each
# from its own Ruby thread (or fiber under Async), until M messages were
# handed out in total; time runs from the first message to the M-th, like
# ccbench. --profile adds the time spent in Inbox#refill (the native drain
# that builds the Message objects) and waiting on the fd, measured by wrapping
# the Inbox in this process only.

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "sluice"
require "json"
require "optparse"
require_relative "cell" # Bench::ProcSelf

module Bench
  # Counts what the consumers' Inboxes do, for --profile and the idle scenario.
  module InboxProbe
    STATS = Hash.new(0)

    def self.now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

    def refill
      started = InboxProbe.now
      got = super
      STATS[:refill_s] += InboxProbe.now - started
      STATS[:refills] += 1
      STATS[:empty_refills] += 1 unless got
      got
    end

    def wait(deadline)
      started = InboxProbe.now
      STATS[:waits] += 1
      super
    ensure
      STATS[:wait_s] += InboxProbe.now - started
    end
  end

  # Per-thread voluntary and involuntary context switches: each is a wake-up of that thread.
  module Switches
    module_function

    def by_group
      Dir.children("/proc/self/task").each_with_object(Hash.new(0)) do |tid, acc|
        comm = File.read("/proc/self/task/#{tid}/comm").strip
        status = File.read("/proc/self/task/#{tid}/status")
        acc[group(comm)] += status[/^voluntary_ctxt_switches:\s+(\d+)/, 1].to_i + status[/^nonvoluntary_ctxt_switches:\s+(\d+)/, 1].to_i
      rescue Errno::ENOENT
        next
      end
    end

    def group(comm)
      return "librdkafka" if comm.start_with?("rdk:")
      return "sluice polling" if comm.start_with?("sluice.")

      "application (Ruby)"
    end
  end

  class ConsumerCell
    def initialize(opts)
      @opts = opts
      @topic = opts[:topic]
    end

    def run = send(:"run_#{@opts[:scenario]}")

    private

    # --- throughput ---------------------------------------------------------

    def run_throughput
      Sluice::Consumer::Inbox.prepend(InboxProbe) if @opts[:profile]
      @target = @opts[:messages]
      @seen = 0
      rss_before = ProcSelf.rss_kb
      threads_before = Thread.list.size
      cpu_start = cpu_now
      consumers = Array.new(@opts[:consumers]) { |i| build_consumer(i, group_id) }
      consumers.each { |c| c.subscribe(@topic) }
      @consumers = consumers
      read_all(consumers)
      raise "only #{@seen} of #{@target} messages within #{@opts[:timeout]} s" unless @last

      @groups = ProcSelf.cpu_by_group

      close_started = now
      consumers.each(&:close)
      throughput_report(rss_before: rss_before, threads_before: threads_before, cpu_total: cpu_now - cpu_start,
                        close_s: now - close_started)
    ensure
      consumers&.each(&:close)
    end

    def read_all(consumers)
      if @opts[:runner] == :fiber
        require "async"
        @reader_cpu = [thread_cpu_of { Sync { consumers.map { |c| Async { read(c) } }.each(&:wait) } }]
      else
        @reader_cpu = Array.new(consumers.size, 0.0)
        threads = consumers.each_with_index.map { |c, i| Thread.new { @reader_cpu[i] = thread_cpu_of { read(c) } } }
        deadline = now + @opts[:timeout]
        threads.each { |t| t.join([deadline - now, 0.1].max) }
        if threads.any?(&:alive?)
          @timed_out = true # poll readers look at it; the others return on stop
          consumers.each(&:stop)
        end
        threads.each(&:join)
      end
    end

    # The "processing" is counting. `@seen += n` has no interrupt check inside
    # it (no method call, no backward jump), so with the GVL no two reader
    # threads interleave in it.
    def read(consumer) = send(:"read_#{@opts[:api]}", consumer)

    def read_each_batch(consumer)
      consumer.each_batch(max_items: @opts[:max_items], max_wait: @opts[:max_wait]) do |batch|
        @seen += batch.size
        milestone if @seen == batch.size || @seen >= @target
      end
    end

    def read_each_message(consumer)
      consumer.each_message do |_message|
        @seen += 1
        milestone if @seen == 1 || @seen >= @target
      end
    end

    def read_poll(consumer)
      until @finished || @timed_out
        next unless consumer.poll(100)

        @seen += 1
        milestone if @seen == 1 || @seen >= @target
      end
    end

    # poll and the store_offset its documentation asks for once a message is processed.
    def read_poll_store_offset(consumer)
      until @finished || @timed_out
        next unless (message = consumer.poll(100))

        @seen += 1
        milestone if @seen == 1 || @seen >= @target
        consumer.store_offset(message)
      end
    end

    # poll(store: true): each poll stores the offset of the message the one before it returned.
    def read_poll_store(consumer)
      until @finished || @timed_out
        next unless consumer.poll(100, store: true)

        @seen += 1
        milestone if @seen == 1 || @seen >= @target
      end
    end

    # The same with config.poll_store = true (build_consumer): no keyword, so no Hash, per call.
    def read_poll_store_config(consumer) = read_poll(consumer)

    # Flags first: a snapshot reads /proc (GVL released), another reader may get here meanwhile.
    def milestone
      if !@started
        @started = true
        @first = snapshot
      elsif !@finished && @seen >= @target
        @finished = true
        @last = snapshot.merge(threads: thread_counts)
        @consumers.each(&:stop)
      end
    end

    # Nothing here releases the GVL before the time and CPU are taken (a read
    # of /proc does: another reader could keep the GVL for its whole time slice).
    def snapshot
      { at: now, cpu: cpu_now, allocated: GC.stat(:total_allocated_objects), gc: GC.count, probe: InboxProbe::STATS.dup,
        rss_kb: ProcSelf.rss_kb }
    end

    def thread_cpu_of
      started = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
      yield
      Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - started
    end

    def throughput_report(rss_before:, threads_before:, cpu_total:, close_s:)
      elapsed = @last[:at] - @first[:at]
      per_msg = ->(seconds) { (seconds / @target * 1e6).round(3) }
      {
        scenario: "throughput", consumers: @opts[:consumers], mode: @opts[:mode], api: @opts[:api], runner: @opts[:runner],
        messages: @target, kafka: @opts[:kafka], elapsed_s: elapsed.round(4), rate: (@target / elapsed).round,
        cpu_us_per_msg: per_msg.call(@last[:cpu] - @first[:cpu]),
        # Each thread's CPU from its start to the last message (join and prefetch included):
        # ruby: the readers (Inbox, Message objects, the block); librdkafka: fetch, parse, its queues
        cpu_us_per_msg_by_group: {
          ruby: per_msg.call(@reader_cpu.sum), polling: per_msg.call(@groups[:polling]), librdkafka: per_msg.call(@groups[:librdkafka])
        },
        # like ccbench: from creating the consumers to having closed them (group join and leave included)
        cpu_us_per_msg_total: per_msg.call(cpu_total),
        allocations_per_msg: ((@last[:allocated] - @first[:allocated]).to_f / @target).round(2),
        gc_runs: @last[:gc] - @first[:gc],
        rss_before_kb: rss_before, rss_first_kb: @first[:rss_kb], rss_last_kb: @last[:rss_kb],
        threads: @last[:threads].merge(ruby_before: threads_before), close_s: close_s.round(3),
        profile: (profile(elapsed) if @opts[:profile]),
        ruby: RUBY_VERSION, librdkafka: Sluice::Native.librdkafka_version
      }
    end

    # Where the reading threads' time went between the first and the M-th message.
    def profile(elapsed)
      stats = @last[:probe].to_h { |k, v| [k, v - @first[:probe][k]] }
      {
        refills: stats[:refills], empty_refills: stats[:empty_refills], waits: stats[:waits],
        refill_s: stats[:refill_s].round(3), wait_s: stats[:wait_s].round(3),
        refill_us_per_msg: (stats[:refill_s] / @target * 1e6).round(3),
        rest_s: (elapsed * @opts[:consumers] - stats[:refill_s] - stats[:wait_s]).round(3),
        rest_us_per_msg: (((elapsed * @opts[:consumers]) - stats[:refill_s] - stats[:wait_s]) / @target * 1e6).round(3)
      }
    end

    # --- 25 consumers + 25 producers in one process ----------------------------

    CROWD_PARTITIONS = 25

    def run_crowd
      count = @opts[:crowd]
      admin_create(@topic, CROWD_PARTITIONS)
      group = group_id
      threads_before = Thread.list.size
      consumers = Array.new(count) { |i| build_consumer(i, group) }
      producers = Array.new(count) { |i| build_producer(i) }
      assigned = Queue.new
      consumers.each do |c|
        c.monitor.subscribe("consumer.partitions_assigned") { assigned << true }
        c.subscribe(@topic)
      end
      result = @opts[:runner] == :fiber ? crowd_fibers(consumers, producers, assigned) : crowd_threads(consumers, producers, assigned)
      result.merge(scenario: "crowd", consumers: count, producers: count, mode: @opts[:mode], runner: @opts[:runner],
                   ruby_threads_before: threads_before)
    ensure
      consumers&.each(&:close)
      producers&.each(&:close)
    end

    def crowd_threads(consumers, producers, assigned)
      seen = 0
      readers = consumers.map { |c| Thread.new { c.each_message { seen += 1 } } }
      crowd_measure(consumers, producers, assigned, -> { seen })
    ensure
      consumers.each(&:stop)
      readers&.each(&:join)
    end

    def crowd_fibers(consumers, producers, assigned)
      require "async"
      seen = 0
      Sync do |task|
        readers = consumers.map { |c| task.async { c.each_message { seen += 1 } } }
        crowd_measure(consumers, producers, assigned, -> { seen })
      ensure
        consumers.each(&:stop)
        readers&.each(&:wait)
      end
    end

    # Every consumer assigned, then each producer sends its messages while the
    # consumers read (from the start of the topic: a fresh group); threads are
    # counted while both are at work.
    def crowd_measure(consumers, producers, assigned, seen)
      deadline = now + @opts[:timeout]
      await(assigned, consumers.size, deadline) { "only %d of #{consumers.size} consumers were assigned partitions" }
      started = now
      handles = producers.each_with_index.flat_map do |p, i|
        Array.new(@opts[:crowd_messages]) { p.produce_async(topic: @topic, payload: "x" * 100, partition: i % CROWD_PARTITIONS) }
      end
      counts = thread_counts
      handles.each(&:wait)
      total = Array.new(CROWD_PARTITIONS) { |p| consumers.first.query_watermark_offsets(@topic, p).last }.sum
      sleep 0.01 while seen.call < total && now < deadline
      { threads: counts, delivered: handles.count { |h| h.error.nil? }, consumed: seen.call, in_topic: total,
        elapsed_s: (now - started).round(3) }
    end

    # Takes count items from queue (Queue#pop has no timeout before Ruby 3.2);
    # sleeps in between, so a fiber scheduler runs the others.
    def await(queue, count, deadline)
      taken = 0
      while taken < count
        begin
          queue.pop(true)
          taken += 1
        rescue ThreadError
          raise format(yield, taken) if now > deadline

          sleep 0.02
        end
      end
    end

    # --- an idle consumer -------------------------------------------------------

    def run_idle
      Sluice::Consumer::Inbox.prepend(InboxProbe)
      admin_create(@topic, 1)
      consumer = build_consumer(0, group_id)
      assigned = Queue.new
      consumer.monitor.subscribe("consumer.partitions_assigned") { assigned << true }
      consumer.subscribe(@topic)
      reader = start_idle_reader(consumer)
      await(assigned, 1, now + @opts[:timeout]) { "no assignment (%d)" }
      sleep 2 # the first fetches and offset lookups settle
      before = idle_snapshot
      sleep @opts[:seconds]
      after = idle_snapshot
      idle_report(before, after)
    ensure
      consumer&.stop
      reader&.join
      consumer&.close
    end

    def start_idle_reader(consumer)
      return Thread.new { consumer.each_message { nil } } unless @opts[:runner] == :fiber

      require "async"
      Thread.new { Sync { consumer.each_message { nil } } } # the fiber's own reactor thread
    end

    def idle_snapshot
      { probe: InboxProbe::STATS.dup, switches: Switches.by_group, cpu: cpu_now,
        poller: (Sluice::Polling::Poller.instance.stats if @opts[:mode] == :fd) }
    end

    def idle_report(before, after)
      delta = ->(a, b) { b.to_h { |k, v| [k, v - a.fetch(k, 0)] } }
      probe = delta.call(before[:probe], after[:probe])
      {
        scenario: "idle", mode: @opts[:mode], runner: @opts[:runner], seconds: @opts[:seconds],
        refills: probe[:refills], empty_refills: probe[:empty_refills], waits: probe[:waits],
        poller: after[:poller] && delta.call(before[:poller], after[:poller]),
        context_switches: delta.call(before[:switches], after[:switches]),
        cpu_ms: ((after[:cpu] - before[:cpu]) * 1000).round(1), threads: thread_counts
      }
    end

    # --- watermarks ---------------------------------------------------------------

    def run_watermarks
      consumer = build_consumer(0, group_id)
      partitions = []
      loop do
        partitions << consumer.query_watermark_offsets(@topic, partitions.size)
      rescue Sluice::Errors::ConsumerError
        break
      end
      { scenario: "watermarks", topic: @topic, partitions: partitions.size, messages: partitions.sum { |low, high| high - low } }
    ensure
      consumer&.close
    end

    # --- helpers -------------------------------------------------------------------

    def build_consumer(index, group)
      Sluice::Consumer.new do |config|
        config.id = "cbench-#{index}"
        config.kafka = { "bootstrap.servers": @opts[:brokers], "group.id": group, "enable.partition.eof": false,
                         "auto.offset.reset": @opts[:scenario] == :idle ? "latest" : "earliest" }.merge(@opts[:kafka])
        config.polling.mode = @opts[:mode]
        config.poll_store = true if @opts[:api] == "poll_store_config"
      end
    end

    def build_producer(index)
      Sluice::Producer.new do |config|
        config.id = "cbench-producer-#{index}"
        config.kafka = { "bootstrap.servers": @opts[:brokers] }
        config.polling.mode = @opts[:mode]
      end
    end

    def admin_create(topic, partitions)
      admin = Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": @opts[:brokers] } }
      admin.create_topic(topic, partitions: partitions) unless admin.topics.include?(topic)
    ensure
      admin&.close
    end

    def group_id = "sluice-cbench-#{Process.pid}-#{(Time.now.to_f * 1000).to_i}"

    # Ruby threads (all, and ours: the poller or per-client polling threads) and OS threads (librdkafka's among them).
    def thread_counts
      comms = Dir.children("/proc/self/task").filter_map do |tid|
        File.read("/proc/self/task/#{tid}/comm").strip
      rescue Errno::ENOENT
        nil
      end
      { ruby: Thread.list.size, polling: Thread.list.count { |t| t.name.to_s.start_with?("sluice.") },
        os: comms.size, librdkafka: comms.count { |c| c.start_with?("rdk:") } }
    end

    def cpu_now = Process.times.then { |t| t.utime + t.stime }
    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end

require_relative "consumer_processes"

if $PROGRAM_NAME == __FILE__
  opts = { scenario: :throughput, consumers: 1, mode: :fd, api: "each_message", runner: :thread, messages: 1_000_000,
           max_items: 500, max_wait: 100, topic: "sluice-cbench", brokers: ENV.fetch("KAFKA_BROKERS", "127.0.0.1:9092"),
           kafka: {}, timeout: 120, crowd: 25, crowd_messages: 1_000, seconds: 10, profile: false,
           processes: 1, launch: :fork, partitions: 6, broker_pid_file: File.expand_path("../tmp/kafka/9092/kafka.pid", __dir__) }
  OptionParser.new do |o|
    o.on("--scenario NAME", %w[throughput crowd idle watermarks processes process]) { |v| opts[:scenario] = v.to_sym }
    o.on("--processes N", Integer, "processes scenario: how many, one consumer each") { |v| opts[:processes] = v }
    o.on("--launch HOW", %w[fork spawn], "processes scenario: fork this process (default) or start fresh Rubies") { |v| opts[:launch] = v.to_sym }
    o.on("--partitions N", Integer, "processes scenario: the topic's (default 6)") { |v| opts[:partitions] = v }
    o.on("--broker-pid-file PATH", "processes scenario: the broker's CPU is read from /proc") { |v| opts[:broker_pid_file] = v }
    o.on("--index I", Integer, "process scenario (a spawned child): its number") { |v| opts[:index] = v }
    o.on("--group G", "process scenario: the group") { |v| opts[:group] = v }
    o.on("--consumers N", Integer) { |v| opts[:consumers] = v }
    o.on("--mode MODE", %w[fd thread]) { |v| opts[:mode] = v.to_sym }
    o.on("--api API", %w[each_message each_batch poll poll_store_offset poll_store poll_store_config]) { |v| opts[:api] = v }
    o.on("--runner R", %w[thread fiber]) { |v| opts[:runner] = v.to_sym }
    o.on("--messages M", Integer) { |v| opts[:messages] = v }
    o.on("--max-items N", Integer) { |v| opts[:max_items] = v }
    o.on("--max-wait MS", Integer) { |v| opts[:max_wait] = v }
    o.on("--topic NAME") { |v| opts[:topic] = v }
    o.on("--crowd N", Integer, "consumers and producers in the crowd scenario (default 25)") { |v| opts[:crowd] = v }
    o.on("--seconds S", Integer, "idle scenario: how long to count") { |v| opts[:seconds] = v }
    o.on("--timeout S", Integer) { |v| opts[:timeout] = v }
    o.on("--profile", "time Inbox#refill and the waits") { opts[:profile] = true }
    o.on("-X KEY=VALUE", "a librdkafka consumer property") do |v|
      k, val = v.split("=", 2)
      opts[:kafka][k.to_sym] = val
    end
  end.parse!
  cell = %i[processes process].include?(opts[:scenario]) ? Bench::ConsumerProcesses : Bench::ConsumerCell
  puts JSON.generate(cell.new(opts).run)
end
