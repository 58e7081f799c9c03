# frozen_string_literal: true

# The consumer benchmark: 1, 3 and 6 consumers in one group read a pre-filled
# 6-partition topic (1,000,000 x 100 bytes), each_message and each_batch, :fd
# and :thread, one fresh process per cell (bench/consumer_cell.rb), against
# raw librdkafka in C measured in the same run (ccbench, built from
# ../shared/tools/ccbench into tmp/ccbench). Then where the time goes (one
# consumer, Inbox timed), 25 consumers + 25 producers in one process (thread
# counts), an idle consumer (wake-ups over 10 s) and 1, 2 and 3 processes of
# one consumer each in one group (bench/consumer_processes.rb: the way past
# one GVL, with the broker's CPU beside them). Prints tables as it goes
# and writes the "Consumer" block of bench/RESULTS.md (the producer sections,
# written by bench/run.rb, stay as they are) and bench/results/consumer-<time>.json.
#
#   ruby bench/consumer_run.rb [--messages 1000000] [--consumers 1,3,6] [--reps 1] [--apis each_message,each_batch]
#                              [--modes fd,thread] [--runner thread|fiber] [-X key=value] [--no-ccbench] [--no-tuned]
#                              [--no-profile] [--no-crowd] [--no-idle] [--processes 1,2,3] [--no-processes] [--no-write]

require "json"
require "open3"
require "optparse"
require "rbconfig"
require "fileutils"
require "etc"
require_relative "environment"
require_relative "consumer_report"
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "sluice" # its consumer's prefetch defaults, for ccbench (the cells load it in their own processes)

module Bench
  class ConsumerRun
    include ConsumerReport
    include Environment

    ROOT = File.expand_path("..", __dir__)
    # Beside the checkout, in CI as here.
    CCBENCH_SRC = File.expand_path("../shared/tools/ccbench", ROOT)
    PARTITIONS = 6
    # librdkafka stops fetching while the consumer queue holds
    # queued.min.messages and looks again after fetch.queue.backoff.ms (2.2+;
    # before, on its broker thread's next 1 s wake-up): a reader slower than
    # the fetcher waits most of each second. sluice's consumer sets 10 ms and
    # a 15,000-message queue by default (2.2+); the tuned rows give ccbench
    # (and, before 2.2, sluice) what lifts that wait, with librdkafka's own
    # queue size (a backoff given keeps it: Consumer::Config). Memory stays
    # bounded by queued.max.messages.kbytes.
    TUNED_2_2 = { "fetch.queue.backoff.ms" => "10" }.freeze
    TUNED_2_0 = { "queued.min.messages" => "1000000" }.freeze
    # Issue 17's goals for one consumer with default settings, msg/s.
    TARGETS = { each_message: 700_000, each_batch: 1_000_000 }.freeze # each_batch: or half of ccbench
    SIX_TARGET = 1_200_000 # 6 consumers in one process

    def self.tuned(version) = Gem::Version.new(version) >= Gem::Version.new("2.2") ? TUNED_2_2 : TUNED_2_0

    def initialize(opts)
      @opts = opts
      @cells = []
      @ceiling = []
      @started = Time.now
    end

    def run
      FileUtils.mkdir_p(File.join(ROOT, "bench/results"))
      build_ccbench if @opts[:ccbench]
      ensure_topic
      matrix
      tuned if @opts[:tuned]
      profile if @opts[:profile]
      crowd if @opts[:crowd]
      idle if @opts[:idle]
      processes unless @opts[:processes].empty?
      write_results
    end

    private

    # --- steps ------------------------------------------------------------------

    def build_ccbench
      raise "ccbench not found at #{CCBENCH_SRC} (it belongs beside the checkout)" unless File.exist?(File.join(CCBENCH_SRC, "ccbench.c"))

      @ccbench = c_benchmark(File.join(CCBENCH_SRC, "ccbench.c"), cflags: "-O2 -std=gnu11")
    end

    def tuned_settings = self.class.tuned(librdkafka_version)

    # The prefetch settings sluice's consumer gives librdkafka by default
    # (Consumer::Config#kafka_pairs: a 10 ms backoff and a 15,000-message
    # queue on 2.2+, librdkafka's own before): the matrix's ccbench runs with
    # them, so both sides fetch alike. At librdkafka's defaults C swung
    # 330k-2.1M msg/s on whether its 1 s backoff hit (the tuned rows show it).
    def sluice_prefetch
      return {} unless Gem::Version.new(librdkafka_version) >= Gem::Version.new("2.2")

      { "fetch.queue.backoff.ms" => Sluice::Consumer::Config::PREFETCH_BACKOFF_MS,
        "queued.min.messages" => Sluice::Consumer::Config::PREFETCH_MESSAGES }
    end

    # Filled once (by ccbench --fill, which also reads it back) and reused while it holds enough.
    def ensure_topic
      marks = cell("--scenario", "watermarks", "--topic", @opts[:topic])
      if marks[:partitions].positive? && marks[:partitions] != PARTITIONS
        raise "topic #{@opts[:topic]} has #{marks[:partitions]} partitions, not #{PARTITIONS}: use --topic"
      end

      missing = @opts[:messages] - marks[:messages]
      return puts("== topic #{@opts[:topic]}: #{marks[:messages]} messages in #{marks[:partitions]} partitions") unless missing.positive?

      raise "topic #{@opts[:topic]} needs #{missing} more messages; ccbench (which fills it) is off" unless @opts[:ccbench]

      puts "== filling #{@opts[:topic]} with #{missing} x 100 bytes (ccbench --fill)"
      ccbench_result(1, ["--fill", "--messages", missing.to_s, "--partitions", PARTITIONS.to_s])
    end

    def matrix
      puts "== #{@opts[:messages]} messages, #{@opts[:runner]} per consumer, #{@opts[:reps]} rep(s)"
      @opts[:reps].times do |rep|
        @opts[:consumers].each do |n|
          ccbench(n, rep) if @opts[:ccbench]
          modes = rep.even? ? @opts[:modes] : @opts[:modes].reverse
          @opts[:apis].product(modes).each { |api, mode| throughput(n, api, mode, rep) }
        end
      end
      puts
      puts matrix_table
      puts
      puts targets_text
    end

    def tuned
      puts "== tuned: #{tuned_settings.map { |k, v| "#{k}=#{v}" }.join(" ")}, 1 consumer"
      ccbench(1, 0, tuned: true) if @opts[:ccbench]
      @opts[:apis].each { |api| throughput(1, api, :fd, 0, tuned: true) }
    end

    def profile
      puts "== where the time goes: 1 consumer, fd, Inbox#refill and the waits timed"
      [{}, tuned_settings].each do |extra|
        @opts[:apis].each { |api| throughput(1, api, :fd, 0, tuned: !extra.empty?, profile: true) }
      end
    end

    CROWD = [%i[fd fiber], %i[fd thread], %i[thread fiber], %i[thread thread]].freeze
    IDLE = [%i[fd thread], %i[fd fiber], %i[thread thread]].freeze

    def crowd
      puts "== 25 consumers + 25 producers in one process (1,000 messages per producer)"
      CROWD.each do |mode, runner|
        result = record(cell("--scenario", "crowd", "--mode", mode.to_s, "--runner", runner.to_s, "--topic", "#{@opts[:topic]}-crowd"))
        t = result[:threads]
        puts format("  %-6s readers=%-6s Ruby threads %3d (polling %2d)  OS threads %4d (librdkafka %4d)  consumed %d/%d in %.1f s",
                    mode, runner, t[:ruby], t[:polling], t[:os], t[:librdkafka], result[:consumed], result[:in_topic], result[:elapsed_s])
      end
    end

    def idle
      puts "== an idle consumer, #{@opts[:idle_seconds]} s"
      IDLE.each do |mode, runner|
        result = record(cell("--scenario", "idle", "--mode", mode.to_s, "--runner", runner.to_s, "--seconds", @opts[:idle_seconds].to_s,
                             "--topic", "#{@opts[:topic]}-idle"))
        puts format("  %-6s reader=%-6s Inbox refills %d, waits %d; poller %s; context switches %s; CPU %.1f ms",
                    mode, runner, result[:refills], result[:waits], poller_text(result[:poller]),
                    result[:context_switches].map { |k, v| "#{k} #{v}" }.join(", "), result[:cpu_ms])
      end
    end

    def processes
      puts "== #{@opts[:processes].join(", ")} processes (forked after loading sluice), one consumer each, one group, " \
           "#{@opts[:modes].first}; broker pid from #{@opts[:broker_pid_file]}"
      @opts[:reps].times do
        @opts[:apis].product(@opts[:processes]).each { |api, count| processes_cell(api, count) }
      end
      puts
      puts processes_table
    end

    # --- cells ------------------------------------------------------------------

    def processes_cell(api, count)
      result = record(cell("--scenario", "processes", "--processes", count.to_s, "--api", api, "--mode", @opts[:modes].first.to_s,
                           "--runner", @opts[:runner].to_s, "--messages", @opts[:messages].to_s, "--topic", @opts[:topic],
                           "--partitions", PARTITIONS.to_s, "--broker-pid-file", @opts[:broker_pid_file], *kafka_args(false)))
      puts format("  sluice  %-12s processes=%d %9d msg/s  CPU us/msg per process %s  cores: processes %.2f, broker %s, " \
                  "anything else %.2f", api, count, result[:rate], result[:per_process].map { format("%.2f", _1[:cpu_us_per_msg]) }.join(" "),
                  result[:cores_used], result.dig(:broker, :cores) || "-", result[:other_cores])
    end

    def throughput(consumers, api, mode, rep, tuned: false, profile: false)
      args = ["--consumers", consumers.to_s, "--api", api, "--mode", mode.to_s, "--runner", @opts[:runner].to_s,
              "--messages", @opts[:messages].to_s, "--topic", @opts[:topic], *kafka_args(tuned)]
      args << "--profile" if profile
      result = record(cell(*args).merge(rep: rep, tuned: tuned))
      t = result[:threads]
      puts format("  sluice  %-12s %-6s consumers=%d%s %9d msg/s  CPU %5.2f us/msg (Ruby %4.2f, librdkafka %4.2f)  " \
                  "threads Ruby %2d (polling %d) OS %3d  RSS %5.1f MB",
                  api, mode, consumers, tuned ? " tuned" : "", result[:rate], result[:cpu_us_per_msg],
                  result[:cpu_us_per_msg_by_group][:ruby], result[:cpu_us_per_msg_by_group][:librdkafka], t[:ruby], t[:polling],
                  t[:os], result[:rss_last_kb] / 1024.0)
      puts "          #{profile_text(result[:profile])}" if profile
    end

    # A C run takes a second or two: several per count, their median is the ceiling (one run
    # slowed by the machine's other work falls into librdkafka's fetch stall too).
    def ccbench(consumers, rep, tuned: false)
      @opts[:ccbench_reps].times do
        result = ccbench_result(consumers, kafka_args(tuned)).merge(consumers: consumers, rep: rep, tuned: tuned)
        @ceiling << result
        puts format("  ccbench %-19s consumers=%d%s %9d msg/s  CPU %5.2f us/msg (incl. join)  OS threads %3d  RSS %5.1f MB",
                    "", consumers, tuned ? " tuned" : "", result[:rate], result[:cpu_us_per_msg], result[:threads], result[:rss_kb] / 1024.0)
      end
    end

    def ccbench_result(consumers, extra)
      out, err, status = Open3.capture3(@ccbench, "--topic", @opts[:topic], "--messages", @opts[:messages].to_s, "--consumers",
                                        consumers.to_s, "--brokers", brokers, "-q", *extra)
      line = out.lines.grep(/^RESULT/).last or raise "ccbench printed no RESULT (exit #{status.exitstatus}): #{err}"
      line.split.drop(1).to_h { |kv| kv.split("=", 2) }.to_h { |k, v| [k.to_sym, v.include?(".") ? v.to_f : v.to_i] }
    end

    def cell(*args)
      out, err, status = Open3.capture3(RbConfig.ruby, File.join(__dir__, "consumer_cell.rb"), *args)
      raise "consumer_cell #{args.join(" ")} failed:\n#{err}\n#{out}" unless status.success?

      JSON.parse(out.lines.last, symbolize_names: true)
    end

    def record(result)
      @cells << result
      result
    end

    # ccbench's properties: the ones given, over sluice's prefetch defaults (the matrix) or the tuned ones.
    def kafka_args(tuned)
      (tuned ? @opts[:kafka].merge(tuned_settings) : sluice_prefetch.merge(@opts[:kafka])).flat_map { |k, v| ["-X", "#{k}=#{v}"] }
    end

    # --- results ----------------------------------------------------------------

    def write_results
      stamp = @started.strftime("%Y%m%d-%H%M%S")
      json = File.join(ROOT, "bench/results/consumer-#{stamp}.json")
      File.write(json, JSON.pretty_generate(started: @started, machine: machine, options: @opts, cells: @cells, ccbench: @ceiling))
      return puts("wrote #{json}") unless @opts[:write]

      write_block("consumer", markdown)
      puts "wrote #{json}, bench/RESULTS.md (consumer block)"
    end
  end
end

opts = { messages: 1_000_000, consumers: [1, 3, 6], reps: 1, apis: %w[each_message each_batch], modes: %i[fd thread], runner: :thread,
         topic: "sluice-cbench", kafka: {}, ccbench: true, tuned: true, profile: true, crowd: true, idle: true, idle_seconds: 10, ccbench_reps: 3,
         processes: [1, 2, 3], write: true, argv: ARGV.dup }
port = ENV.fetch("KAFKA_BROKERS", "127.0.0.1:9092").split(",").first.split(":").last
opts[:broker_pid_file] = File.expand_path("../tmp/kafka/#{port}/kafka.pid", __dir__)
OptionParser.new do |o|
  o.on("--messages M", Integer, "messages in the topic and per cell (default 1000000)") { |v| opts[:messages] = v }
  o.on("--consumers LIST", Array, "consumer counts (default 1,3,6)") { |v| opts[:consumers] = v.map { Integer(_1) } }
  o.on("--reps N", Integer, "repetitions of the matrix (default 1)") { |v| opts[:reps] = v }
  o.on("--apis LIST", Array, "each_message,each_batch (also: poll, poll_store_offset, poll_store, poll_store_config)") { |v| opts[:apis] = v }
  o.on("--modes LIST", Array, "fd,thread") { |v| opts[:modes] = v.map(&:to_sym) }
  o.on("--runner R", %w[thread fiber], "each consumer read by a thread (default) or a fiber") { |v| opts[:runner] = v.to_sym }
  o.on("--topic NAME", "default sluice-cbench (6 partitions; -crowd and -idle topics beside it)") { |v| opts[:topic] = v }
  o.on("-X KEY=VALUE", "a librdkafka consumer property, for sluice and ccbench") do |v|
    k, val = v.split("=", 2)
    opts[:kafka][k] = val
  end
  o.on("--no-ccbench", "skip the C ceiling (the topic must be full already)") { opts[:ccbench] = false }
  o.on("--ccbench-reps N", Integer, "C runs per consumer count and rep, median taken (default 3)") { |v| opts[:ccbench_reps] = v }
  o.on("--no-tuned", "skip the rows with queued.min.messages raised") { opts[:tuned] = false }
  o.on("--no-profile", "skip the timed-Inbox cells") { opts[:profile] = false }
  o.on("--no-crowd", "skip 25 consumers + 25 producers") { opts[:crowd] = false }
  o.on("--no-idle", "skip the idle consumer") { opts[:idle] = false }
  o.on("--idle-seconds S", Integer) { |v| opts[:idle_seconds] = v }
  o.on("--processes LIST", Array, "process counts, one consumer each in one group (default 1,2,3)") { |v| opts[:processes] = v.map { Integer(_1) } }
  o.on("--no-processes", "skip the processes") { opts[:processes] = [] }
  o.on("--broker-pid-file PATH", "whose CPU the processes table shows (default tmp/kafka/PORT/kafka.pid)") { |v| opts[:broker_pid_file] = v }
  o.on("--no-write", "leave bench/RESULTS.md alone") { opts[:write] = false }
end.parse!
Bench::ConsumerRun.new(opts).run
