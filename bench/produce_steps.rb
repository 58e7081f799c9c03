# frozen_string_literal: true

# Where a produce_async's time goes, step by step, on one producer (fd mode):
# each step timed alone (the calling thread's CPU) over bursts that fit
# librdkafka's queue, medians of several rounds. Each step includes the ones above it, so the differences
# are what each adds. The last line is the whole per-message CPU of a burst,
# delivery reports included, beside raw librdkafka in C (cbench) measured in
# the same run. The figures behind docs/DESIGN.md's "What a produce_async
# costs".
#
#   ruby bench/produce_steps.rb [--messages 50000] [--rounds 5] [--brokers 127.0.0.1:9092]

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "sluice"
require "optparse"
require "open3"
require_relative "environment"

module Bench
  class ProduceSteps
    include Environment

    TOPIC = "sluice-bench"
    CBENCH_SRC = File.expand_path("../../shared/tools/cbench/cbench.c", __dir__)

    def initialize(opts)
      @opts = opts
      @payload = ("x" * 100).freeze
    end

    def run
      @producer = Sluice::Producer.new { |config| config.kafka = { "bootstrap.servers": @opts[:brokers] } }
      @producer.produce_sync(topic: TOPIC, payload: @payload) # connected, topic known
      @client = @producer.client
      puts "ruby #{RUBY_VERSION}, librdkafka #{Sluice.librdkafka_version}; #{@opts[:messages]} messages per round, " \
           "medians of #{@opts[:rounds]} rounds; ns per message, each step including the ones above it"
      previous = 0
      steps.each do |label, step|
        ns = median(Array.new(@opts[:rounds]) { timed(step) })
        puts format("  %-66s %5.0f ns  (+%.0f)", label, ns, ns - previous)
        previous = ns
      end
      whole
    ensure
      @producer&.close
    end

    private

    # [label, the method that makes n calls and returns the handles to wait for (or nil)]
    def steps
      [["the loop", :loop_only],
       ["+ a message Hash per call (what an application builds)", :hashes],
       ["+ the native validation of it (Native::Producer#validate)", :validations],
       ["+ a Delivery::Handle (a Ruby object: what produce_async returns)", :handles],
       ["native produce: validation, handle, rd_kafka_produceva", :native_produces],
       ["Producer#produce_async (middleware, variant, transaction, reload)", :produce_asyncs]]
    end

    def loop_only(count) = count.times { nil } && nil
    def hashes(count) = count.times { message } && nil
    def validations(count) = count.times { @client.validate(message) } && nil

    def handles(count)
      count.times do
        @client.validate(message)
        Sluice::Delivery::Handle.allocate
      end
      nil
    end

    def native_produces(count) = Array.new(count) { @client.produce(message) }
    def produce_asyncs(count) = Array.new(count) { @producer.produce_async(message) }

    def message = { topic: TOPIC, payload: @payload }

    # ns per message of one round: the calling thread's CPU in the calls only (not the poller's, nor
    # librdkafka's, nor waiting for the GVL); their handles are waited for afterwards.
    def timed(step)
      GC.start
      started = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
      handles = send(step, @opts[:messages])
      elapsed = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - started
      handles&.each(&:wait)
      elapsed * 1e9 / @opts[:messages]
    end

    # The whole process's CPU per message of produce_async bursts, delivery reports included, beside C's.
    def whole
      cpu = median(Array.new(@opts[:rounds]) do
        GC.start
        before = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
        produce_asyncs(@opts[:messages]).each(&:wait)
        (Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - before) * 1e6 / @opts[:messages]
      end)
      puts format("whole process, produce_async then wait: %.2f µs of CPU per message (every thread: Ruby, poller, librdkafka)", cpu)
      return puts("cbench: not found at #{CBENCH_SRC}") unless File.exist?(CBENCH_SRC)

      c = median(Array.new(@opts[:rounds]) do
        out, = Open3.capture2(c_benchmark(CBENCH_SRC), "--mode", "fd", "--producers", "1", "--messages", @opts[:messages].to_s,
                              "--topic", TOPIC, "--brokers", @opts[:brokers], "-q")
        result = out.lines.grep(/^RESULT/).last.split.drop(1).to_h { |kv| kv.split("=", 2) }
        result["cpu_s"].to_f * 1e6 / result["delivered"].to_f
      end)
      puts format("cbench, the same burst in C:            %.2f µs of CPU per message (%.1fx)", c, cpu / c)
    end
  end
end

if $PROGRAM_NAME == __FILE__
  opts = { messages: 50_000, rounds: 5, brokers: ENV.fetch("KAFKA_BROKERS", "127.0.0.1:9092") }
  OptionParser.new do |o|
    o.on("--messages N", Integer, "per round; librdkafka's queue holds 100,000") { |v| opts[:messages] = v }
    o.on("--rounds N", Integer) { |v| opts[:rounds] = v }
    o.on("--brokers LIST") { |v| opts[:brokers] = v }
  end.parse!
  Bench::ProduceSteps.new(opts).run
end
