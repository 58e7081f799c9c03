# frozen_string_literal: true

# Parallel consumption (issue 43): each_message(concurrency: N) with a block
# that sleeps 10 ms (an I/O wait), over 100,000 messages with 1,000 distinct
# keys, on a 1-partition and a 6-partition topic. Prints messages per second,
# CPU per message (this process's, all threads) and per-key order
# violations, for each concurrency, ordering, polling mode and kind of
# worker asked, beside concurrency 1 in the same run: threads (each_message
# called from a plain thread) and fibers (called inside Async { }, Debian's
# async 1.30: the blocks are fibers of its scheduler, their sleep a timer of
# it). A cell stops after --messages or --seconds, whichever comes first
# (concurrency 1 at 10 ms a message would take 17 minutes for 100,000): its
# rate is over what it read. Writes the "parallel" block of bench/RESULTS.md
# (bin/bench keeps it) unless --no-write.
#
#   ruby bench/parallel.rb [--messages 100000] [--seconds 20] [--concurrency 1,16,64,256]
#                          [--orderings key,partition] [--partitions 1,6] [--modes fd]
#                          [--workers threads,fibers,pc] [--reps 3] [--no-write]
#
# pc: Confluent's Parallel Consumer on the same workload (bench/pc), a row
# beside each cell, when javac and its jars (tmp/pc/lib) are there.

require "optparse"
require "securerandom"
require "etc"
require_relative "environment"
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "sluice"
require "async"
require_relative "pc/parallel_consumer"

module Bench
  class Parallel
    include Environment

    KEYS = 1_000
    SLEEP = 0.010
    TOPIC = "sluice-bench-parallel-%dp"
    PAYLOAD = "x" * 100

    def initialize(opts)
      @opts = opts
      @brokers = brokers
      @rows = []
      @pc = ParallelConsumer.new(@brokers, opts[:messages], opts[:seconds]) if opts[:workers].include?(:pc)
    end

    def run
      puts title
      puts format("%-4s %-7s %-10s %-6s %5s %9s %9s %10s %8s %10s", "mode", "workers", "ordering", "parts", "conc", "messages", "seconds",
                  "msg/s", "µs CPU", "violations")
      @opts[:partitions].each do |partitions|
        topic = prepare(partitions)
        @opts[:modes].each do |mode|
          @opts[:orderings].each do |ordering|
            @opts[:concurrency].each { |concurrency| alternated(topic, partitions, mode, ordering, concurrency) }
          end
        end
      end
      # With PC rows the run is a block of its own: the matrix without them stays.
      write_block(@pc ? "parallel-pc" : "parallel", markdown, command: "parallel") if @opts[:write]
    end

    private

    # Each kind of worker (and PC) in turn, --reps times; a row each, its median run by rate.
    def alternated(topic, partitions, mode, ordering, concurrency)
      runs = Hash.new { |h, k| h[k] = [] }
      @opts[:reps].times do
        @opts[:workers].each do |workers|
          runs[workers] << (workers == :pc ? @pc.cell(topic, ordering, concurrency) : cell(topic, partitions, mode, workers, concurrency, ordering))
        end
      end
      runs.each do |workers, results|
        median = results.sort_by { |count, seconds| count / seconds }[results.size / 2]
        row(workers == :pc ? :jvm : mode, workers, ordering, partitions, concurrency, median)
      end
    end

    def title
      "each_message(concurrency:), a #{(SLEEP * 1000).round} ms sleep per message, #{@opts[:messages]} messages, #{KEYS} keys; " \
        "Ruby #{RUBY_VERSION}, librdkafka #{Sluice.librdkafka_version}, #{Etc.nprocessors} cores"
    end

    def markdown
      rows = @rows.map do |mode, workers, ordering, partitions, concurrency, (count, seconds, cpu, violations)|
        rate = count / seconds
        goal = rate >= concurrency / SLEEP * 0.8 ? " ✓" : ""
        "| #{mode} | #{workers} | :#{ordering} | #{partitions} | #{concurrency} | #{count} | #{seconds.round(1)} | #{rate.round}#{goal} | " \
          "#{versus_pc(rate, ordering, partitions, concurrency)} | #{(cpu * 1e6 / count).round} | #{violations} |"
      end
      <<~MD
        ## Parallel consumption#{@pc ? ", beside Confluent's Parallel Consumer (issue 58, item 5)" : " (issue 43)"}

        #{title}. `#{["bin/bench parallel", @opts[:command]].compact.join(" ").strip}` (bench/parallel.rb), #{Time.now.utc.strftime("%Y-%m-%d")}, #{machine[:cpu]}, Kafka #{machine[:kafka]}.
        A cell reads until #{@opts[:messages]} messages or #{@opts[:seconds].round} s; msg/s is over what it read; CPU is the
        process's (every thread) per message; violations: a key's message started before an earlier one of it. ✓: at least
        80% of concurrency / 10 ms. workers: `threads`, each_message called from a plain thread; `fibers`, called inside
        `Async { }` (async #{Async::VERSION}), the blocks fibers of its scheduler in the reader's thread. The reader takes
        messages in the order librdkafka hands them over, a fetch batch of one partition after another: under `:partition`
        the bound fills with one partition's messages and the others wait (README, "Parallel consumption").

        #{pc_note}

        | mode | workers | ordering | partitions | concurrency | messages | s | msg/s | × PC | µs CPU/msg | violations |
        |---|---|---|---|---|---|---|---|---|---|---|
        #{rows.join("\n")}
      MD
    end

    # This rate over PC's in the same cell (ordering, partitions, concurrency), or "—" without PC.
    def versus_pc(rate, ordering, partitions, concurrency)
      pc = @rows.find { |_, workers, *cell, _| workers == :pc && cell == [ordering, partitions, concurrency] } or return "—"

      count, seconds = pc.last
      format("%.2f", rate / (count / seconds))
    end

    def pc_note
      return "No PC rows: run with `--workers threads,fibers,pc` where javac and PC's jars are (bench/pc/README.md)." unless @pc

      "`pc`: Confluent's Parallel Consumer #{ParallelConsumer::VERSION} (bench/pc/ParallelBench.java, Java #{@pc.java_version}) on the same " \
        "topic and block, its own group (subscribe; the clock of every row starts at its first block). Rows: the median run (by msg/s) " \
        "of #{@opts[:reps]}, the workers alternated run by run; × PC: msg/s over PC's in the same cell."
    end

    def row(mode, workers, ordering, partitions, concurrency, result)
      @rows << [mode, workers, ordering, partitions, concurrency, result]
      count, seconds, cpu, violations = result
      puts format("%-4s %-7s %-10s %-6d %5d %9d %9.1f %10.0f %8.0f %10d", mode, workers, ordering, partitions, concurrency, count, seconds,
                  count / seconds, cpu * 1e6 / count, violations)
    end

    # Fills the topic once (kept between runs: created with its partitions, up to --messages).
    def prepare(partitions)
      topic = format(TOPIC, partitions)
      admin = Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": @brokers } }
      admin.create_topic(topic, partitions: partitions) unless admin.topics.include?(topic)
      admin.close
      have = Array.new(partitions) { |p| watermark(topic, p) }.sum
      fill(topic, @opts[:messages] - have) if have < @opts[:messages]
      topic
    end

    def watermark(topic, partition)
      consumer = Sluice::Consumer.new { |config| config.kafka = { "bootstrap.servers": @brokers, "group.id": "sluice-bench-parallel-watermarks" } }
      consumer.query_watermark_offsets(topic, partition).last
    ensure
      consumer&.close
    end

    def fill(topic, count)
      producer = Sluice::Producer.new { |config| config.kafka = { "bootstrap.servers": @brokers, "linger.ms": 5 } }
      count.times { |i| producer.produce_async(topic: topic, key: "key-#{i % KEYS}", payload: PAYLOAD) }
      producer.close
    end

    # @return [Array(Integer, Float, Float, Integer)] messages, seconds, CPU seconds, order violations
    def cell(topic, partitions, mode, workers, concurrency, ordering)
      consumer = Sluice::Consumer.new do |config|
        config.kafka = { "bootstrap.servers": @brokers, "group.id": "sluice-bench-parallel-#{SecureRandom.hex(4)}", "auto.offset.reset": "earliest" }
        config.polling.mode = mode
      end
      consumer.assign(topic => Array.new(partitions) { |p| p })
      counter = Counter.new(@opts[:messages], @opts[:seconds], consumer)
      cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
      read = lambda do
        consumer.each_message(concurrency: concurrency, ordering: ordering) do |message|
          counter.started(message)
          sleep(SLEEP)
          counter.finished
        end
      end
      workers == :fibers ? Async { read.call }.wait : read.call
      cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - cpu
      [counter.count, counter.seconds, cpu, counter.violations]
    ensure
      consumer&.close
    end

    # Counts finished blocks, stops the read at the limit, and checks each key's order as its blocks start.
    class Counter
      attr_reader :count, :violations

      def initialize(limit, seconds, consumer)
        @limit = limit
        @consumer = consumer
        @lock = Mutex.new
        @count = 0
        @violations = 0
        @last = {}
        @seconds = seconds
      end

      # The clock starts at the first block, as PC's (bench/pc) does: not at the connection.
      def started(message)
        @lock.synchronize do
          @started ||= now
          @deadline ||= @started + @seconds
          key = [message.partition, message.key]
          previous = @last[key]
          @violations += 1 if previous && message.offset < previous
          @last[key] = message.offset
        end
      end

      def finished
        @lock.synchronize do
          @count += 1
          return unless @count >= @limit || now >= @deadline

          @ended ||= now
          @consumer.stop
        end
      end

      def seconds = (@ended || now) - (@started || now)

      private

      def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end

if $PROGRAM_NAME == __FILE__
  $stdout.sync = true # a row per cell as it ends (the run takes minutes)
  opts = { messages: 100_000, seconds: 20, concurrency: [1, 16, 64, 256], orderings: %i[key partition], partitions: [1, 6], modes: [:fd],
           workers: Bench::ParallelConsumer.available? ? %i[threads fibers pc] : %i[threads fibers], reps: 1, write: true }
  opts[:command] = ARGV.join(" ")
  OptionParser.new do |o|
    o.on("--messages N", Integer) { |v| opts[:messages] = v }
    o.on("--seconds S", Float, "a cell's longest read") { |v| opts[:seconds] = v }
    o.on("--concurrency LIST", Array) { |v| opts[:concurrency] = v.map { |c| Integer(c) } }
    o.on("--orderings LIST", Array) { |v| opts[:orderings] = v.map(&:to_sym) }
    o.on("--partitions LIST", Array) { |v| opts[:partitions] = v.map { |c| Integer(c) } }
    o.on("--modes LIST", Array) { |v| opts[:modes] = v.map(&:to_sym) }
    o.on("--workers LIST", Array, "threads, fibers (inside Async { }), pc (Parallel Consumer)") { |v| opts[:workers] = v.map(&:to_sym) }
    o.on("--reps N", Integer, "runs of each cell, workers alternated; the median is kept") { |v| opts[:reps] = v }
    o.on("--no-write", "leave bench/RESULTS.md alone") { opts[:write] = false }
  end.parse!
  Bench::Parallel.new(opts).run
end
