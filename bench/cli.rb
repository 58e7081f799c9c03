# frozen_string_literal: true

# The command line against kcat (issue 42, item 6), side by side on the same
# broker in one run: 1,000,000 lines of 100 bytes produced with
# `sluice produce TOPIC` and `kcat -P -b B -t TOPIC`, each into a fresh topic
# of one partition, then read back with `sluice tail TOPIC -o beginning -e`
# and `kcat -C -b B -t TOPIC -o beginning -e`. Each command is a child
# process: wall time from spawn to exit, CPU the child's user + sys (as the
# waiting parent's Process.times counts it), per line and as a ratio
# sluice/kcat. The tools alternate which goes first; medians of the
# repetitions, min-max beside them.
#
# Honest numbers: each produced topic must hold exactly the lines given
# (its high watermark), and each tail must print exactly the input, byte
# for byte (a SHA-256 of both), or the run fails.
#
#   ruby bench/cli.rb [--lines 1000000] [--reps 3] [--brokers 127.0.0.1:9092] [--no-write] [--sluice EXE]
#
# --sluice runs another checkout's exe/sluice (its lib/ beside it, built), e.g. a branch under test.
#
# Writes the "cli" block of bench/RESULTS.md. bin/bench cli runs it (and
# installs Debian's kcat when it is missing).

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "sluice"
require "digest"
require "fileutils"
require "optparse"
require "rbconfig"
require_relative "environment"

module Bench
  # One run of the four commands per repetition, checked, and the table.
  class CliAgainstKcat
    include Environment

    LINE_BYTES = 100
    STEPS = %i[produce tail].freeze
    TOOLS = %i[sluice kcat].freeze

    def initialize(opts)
      @opts = opts
      @dir = File.join(ROOT, "tmp", "bench-cli")
      @input = File.join(@dir, "lines-#{opts[:lines]}.txt")
      @sluice = opts[:sluice]
      @times = Hash.new { |hash, key| hash[key] = [] } # [step, tool] => [[wall s, cpu s], ...]
    end

    def run
      prepare_input
      @load = [load_average]
      @opts[:reps].times { |rep| repetition(rep) }
      @load << load_average
      table = markdown
      puts table
      write_block("cli", table) if @opts[:write]
    end

    private

    def prepare_input
      FileUtils.mkdir_p(@dir)
      unless File.exist?(@input)
        File.open("#{@input}.part", "wb") do |file|
          @opts[:lines].times { |n| file.write(format("%09d ", n).ljust(LINE_BYTES, "x") << "\n") }
        end
        File.rename("#{@input}.part", @input)
      end
      @digest = Digest::SHA256.file(@input).hexdigest
    end

    # Each tool produces into a topic of its own; both tails read the one
    # sluice produced (the same bytes in the same order as kcat's).
    def repetition(rep)
      topics = TOOLS.to_h { |tool| [tool, "sluice-bench-cli-#{Process.pid}-#{rep}-#{tool}"] }
      with_admin { |admin| topics.each_value { |topic| admin.create_topic(topic, partitions: 1) } }
      tools = rep.even? ? TOOLS : TOOLS.reverse
      STEPS.each do |step|
        tools.each { |tool| measure(step, tool, rep) { step == :produce ? produce(tool, topics[tool]) : tail(tool, topics[:sluice]) } }
      end
    ensure
      with_admin { |admin| topics.each_value { |topic| admin.delete_topic(topic) } } if topics
    end

    def produce(tool, topic)
      command = command(:produce, tool, topic)
      status = run_child(command, in: @input, out: File::NULL, err: File.join(@dir, "#{tool}-produce.err"))
      raise "#{command.join(" ")} failed (#{status}): #{File.read(File.join(@dir, "#{tool}-produce.err"))[0, 2000]}" unless status.success?

      high = with_admin { |admin| admin.watermark_offsets(topic, 0).last }
      raise "#{tool} produced #{high} messages, not #{@opts[:lines]}" unless high == @opts[:lines]
    end

    def tail(tool, topic)
      output = File.join(@dir, "#{tool}-tail.out")
      command = command(:tail, tool, topic)
      status = run_child(command, in: File::NULL, out: output, err: File.join(@dir, "#{tool}-tail.err"))
      raise "#{command.join(" ")} failed (#{status})" unless status.success?

      return if Digest::SHA256.file(output).hexdigest == @digest

      raise "#{tool} tail printed #{File.foreach(output).count} lines, not the #{@opts[:lines]} given, or other bytes"
    ensure
      FileUtils.rm_f(output)
    end

    # The commands compared, as a user types them (-q: no log lines; --progress 0: no progress lines).
    def command(step, tool, topic)
      case [step, tool]
      in [:produce, :sluice] then [RbConfig.ruby, @sluice, "produce", topic, "-b", brokers, "--progress", "0", "-q"]
      in [:produce, :kcat] then ["kcat", "-P", "-b", brokers, "-t", topic]
      in [:tail, :sluice] then [RbConfig.ruby, @sluice, "tail", topic, "-o", "beginning", "-e", "-b", brokers, "-q"]
      in [:tail, :kcat] then ["kcat", "-C", "-b", brokers, "-t", topic, "-o", "beginning", "-e", "-q"]
      end
    end

    # The child's CPU: what Process.times adds to the waited children's user and sys.
    def run_child(command, **redirects)
      before = Process.times
      started = now
      pid = Process.spawn(*command, **redirects)
      _, status = Process.wait2(pid)
      @last = [now - started, Process.times.then { |after| after.cutime + after.cstime - before.cutime - before.cstime }]
      status
    end

    def measure(step, tool, rep)
      yield
      @times[[step, tool]] << @last
      wall, cpu = @last
      warn format("  rep %d %-7s %-6s wall %6.2f s  cpu %6.2f s  %5.2f µs/line", rep + 1, step, tool, wall, cpu, cpu * 1e6 / @opts[:lines])
    end

    def markdown
      <<~MD
        ## The command line against kcat (`bin/bench cli`)

        Generated by `bin/bench cli --lines #{@opts[:lines]} --reps #{@opts[:reps]}` on #{Time.now.utc.strftime("%Y-%m-%d %H:%M UTC")}.
        Machine: #{machine[:cpu]}, #{machine[:cores]} cores; Ruby #{RUBY_VERSION}, librdkafka #{machine[:librdkafka]};
        #{kcat_version}; Kafka #{machine[:kafka]} (single broker on loopback); load average #{@load.join(" at the start, ")} at the end.
        #{delimited(@opts[:lines])} lines of #{LINE_BYTES} bytes; each tool produces into a fresh topic of 1 partition
        (`sluice produce TOPIC` against `kcat -P -b B -t TOPIC`), then both read the same topic back
        (`sluice tail TOPIC -o beginning -e` against `kcat -C -b B -t TOPIC -o beginning -e`), output to a file.
        Each command is a child process: wall from spawn to exit, CPU its user + sys (Ruby's start and the
        clients' connects included). Checked: every produced topic holds #{delimited(@opts[:lines])} messages, every
        tail prints the input byte for byte. Medians of #{@opts[:reps]} repetitions (min-max), the tools
        alternating which goes first; a ratio is the median of the repetitions' own ratios (the machine is shared).

        | step | sluice wall s | kcat wall s | wall sluice/kcat | sluice CPU s | kcat CPU s | sluice CPU µs/line | kcat CPU µs/line | CPU sluice/kcat |
        |---|---:|---:|---:|---:|---:|---:|---:|---:|
        #{STEPS.map { |step| row(step) }.join("\n")}

        Target (issue 42, issue 58 item 3): CPU within 2x kcat's for both steps: #{target_met? ? "met" : "missed"}.
      MD
    end

    def row(step)
      sluice, kcat = TOOLS.map { |tool| @times[[step, tool]] }
      cells = [spread(sluice, 0), spread(kcat, 0), ratio(sluice, kcat, 0),
               spread(sluice, 1), spread(kcat, 1), per_line(sluice), per_line(kcat), ratio(sluice, kcat, 1)]
      "| #{step} | #{cells.join(" | ")} |"
    end

    def spread(runs, index)
      values = runs.map { |run| run[index] }
      format("%.2f (%.2f-%.2f)", median(values), values.min, values.max)
    end

    def per_line(runs) = format("%.2f", median(runs.map { |run| run[1] }) * 1e6 / @opts[:lines])
    def ratio(sluice, kcat, index) = format("%.1fx", median_ratio(sluice, kcat, index))
    # The median of the repetitions' own ratios: a repetition's two runs are back to back, so a burst
    # of the machine's other load skews one repetition, not the ratio.
    def median_ratio(sluice, kcat, index) = median(sluice.zip(kcat).map { |mine, theirs| mine[index] / theirs[index] })
    def target_met? = STEPS.all? { |step| median_ratio(@times[[step, :sluice]], @times[[step, :kcat]], 1) <= 2.0 }

    def delimited(number) = number.to_s.reverse.scan(/\d{1,3}/).join(",").reverse

    def kcat_version
      version = `kcat -V 2>&1`
      "kcat #{version[/Version (\S+)/, 1]} (Debian's, on librdkafka #{version[/librdkafka ([\d.]+)/, 1]})"
    end

    def with_admin
      admin = Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": brokers } }
      yield admin
    ensure
      admin&.close
    end

    def load_average = File.read("/proc/loadavg").split.first
    def brokers = @opts[:brokers]
    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end

if $PROGRAM_NAME == __FILE__
  opts = { lines: 1_000_000, reps: 3, brokers: ENV.fetch("KAFKA_BROKERS", "127.0.0.1:9092"), write: true,
           sluice: File.join(Bench::Environment::ROOT, "exe", "sluice") }
  OptionParser.new do |parser|
    parser.on("--lines N", Integer) { |n| opts[:lines] = n }
    parser.on("--reps N", Integer) { |n| opts[:reps] = n }
    parser.on("--brokers LIST") { |list| opts[:brokers] = list }
    parser.on("--no-write", "print only: leave bench/RESULTS.md alone") { opts[:write] = false }
    parser.on("--sluice EXE", "another checkout's exe/sluice") { |path| opts[:sluice] = File.expand_path(path) }
  end.parse!
  abort "bench/cli.rb needs kcat: apt-get install -y kcat (bin/bench cli installs it)" unless system("command -v kcat >/dev/null")
  Bench::CliAgainstKcat.new(opts).run
end
