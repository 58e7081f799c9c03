# frozen_string_literal: true

# What idle producers cost (issue 44, item 4): 1,000 producers in :fd mode that
# send nothing, and the CPU the process and its poller thread spend per second
# of wall time while they sit there. Each rep runs every tree given (this one,
# plus any --lib, e.g. main's) in a fresh child process, alternately, so a
# noisy machine weighs on both alike; the 1-minute load average is printed
# beside each row. Writes its block of bench/RESULTS.md.
#
#   ruby bench/idle.rb [--producers 1000] [--seconds 10] [--reps 3] [--lib /other/tree/lib]
#
# The peer (WaterDrop 2.10.3 on karafka-rdkafka 0.28, a polling thread per
# producer) is not installed here: issue 44's study measured it at 5.5-7.6 ms/s
# of process CPU at 1,000 idle producers. bin/bench idle starts a local broker
# unless KAFKA_BROKERS is set.

require "optparse"
require "rbconfig"
require "json"
require_relative "environment"

module Bench
  # One measurement, in the child process: build the producers, let them
  # settle, then read CPU clocks across a window.
  class IdleCell
    def initialize(opts)
      @opts = opts
    end

    def run
      producers = Array.new(@opts[:producers]) { build }
      sleep(@opts[:settle])
      poller = Sluice::Polling::Poller.instance
      before = [monotonic, process_cpu, poller_cpu, poller.stats]
      sleep(@opts[:seconds])
      after = [monotonic, process_cpu, poller_cpu, poller.stats]
      producers.each(&:close)
      report(before, after)
    end

    private

    def build
      Sluice::Producer.new do |config|
        config.kafka = { "bootstrap.servers": @opts[:brokers] }
        config.polling.mode = :fd
        config.logger = Logger.new(nil)
      end
    end

    def report(before, after)
      wall = after[0] - before[0]
      waits = after[3][:waits] - before[3][:waits]
      periodic = after[3][:periodic_polls] - before[3][:periodic_polls]
      { process_ms_s: (after[1] - before[1]) * 1000 / wall, poller_ms_s: (after[2] - before[2]) * 1000 / wall,
        waits_s: waits / wall, periodic_polls_s: periodic / wall }
    end

    def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    def process_cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)

    # The poller's native thread carries its Ruby name (sluice.poller#0).
    def poller_cpu
      tick = 100.0 # USER_HZ on Linux
      Dir.children("/proc/self/task").sum do |tid|
        next 0 unless File.read("/proc/self/task/#{tid}/comm").start_with?("sluice.poller")

        fields = File.read("/proc/self/task/#{tid}/stat").split(") ").last.split
        (fields[11].to_i + fields[12].to_i) / tick
      rescue Errno::ENOENT
        0
      end
    end
  end

  # The parent: alternates the trees within each rep and prints a table.
  class Idle
    include Environment

    PEER = "WaterDrop 2.10.3 (karafka-rdkafka 0.28, a polling thread per producer) is not installed here; " \
           "issue 44's study measured it at 5.5-7.6 ms/s of process CPU at 1,000 idle producers (not this run)."

    def initialize(argv)
      @argv = argv.dup
      @opts = { producers: 1000, seconds: 10, settle: 5, reps: 3, libs: [File.expand_path("../lib", __dir__)],
                brokers: ENV.fetch("KAFKA_BROKERS", "127.0.0.1:9092") }
      OptionParser.new do |o|
        o.on("--producers N", Integer) { |v| @opts[:producers] = v }
        o.on("--seconds N", Float) { |v| @opts[:seconds] = v }
        o.on("--settle N", Float) { |v| @opts[:settle] = v }
        o.on("--reps N", Integer) { |v| @opts[:reps] = v }
        o.on("--lib DIR", "another tree's lib/ to compare (e.g. main's)") { |v| @opts[:libs] << File.expand_path(v) }
        o.on("--child LIB") { |v| @opts[:child] = v }
      end.parse!(argv)
    end

    def run
      return child if @opts[:child]

      puts "#{@opts[:producers]} idle producers (:fd), #{@opts[:seconds]} s window after #{@opts[:settle]} s settling"
      puts format("%-4s %-36s %10s %10s %8s %10s %6s", "rep", "lib", "proc ms/s", "poller ms/s", "waits/s",
                  "periodic/s", "load")
      @rows = (1..@opts[:reps]).flat_map { |rep| @opts[:libs].map { |lib| row(rep, lib) } }
      summary
      puts "peer: #{PEER}"
      write_block("idle", markdown)
    end

    private

    def child
      $LOAD_PATH.unshift(@opts[:child])
      require "sluice"
      require "logger"
      puts JSON.generate(IdleCell.new(@opts).run)
    end

    def row(rep, lib)
      load = File.read("/proc/loadavg").split.first
      args = ["--child", lib, "--producers", @opts[:producers], "--seconds", @opts[:seconds], "--settle", @opts[:settle]]
      out = IO.popen({ "KAFKA_BROKERS" => @opts[:brokers] }, [RbConfig.ruby, __FILE__, *args.map(&:to_s)], &:read)
      r = JSON.parse(out.lines.last, symbolize_names: true)
      puts format("%-4d %-36s %10.1f %10.1f %8.1f %10.1f %6s", rep, lib[-36..] || lib, r[:process_ms_s], r[:poller_ms_s],
                  r[:waits_s], r[:periodic_polls_s], load)
      r.merge(lib: lib, load: load)
    end

    def summary
      medians.each do |lib, m|
        puts format("median %-36s process %.1f ms/s, poller %.1f ms/s", lib[-36..] || lib, m[:process_ms_s], m[:poller_ms_s])
      end
    end

    def medians
      @rows.group_by { |r| r[:lib] }.transform_values do |rs|
        %i[process_ms_s poller_ms_s waits_s periodic_polls_s].to_h { |key| [key, median(rs.map { _1[key] })] }
                                                             .merge(loads: rs.map { _1[:load].to_f })
      end
    end

    def markdown
      rows = medians.map do |lib, m|
        format("| `%s` | %.1f | %.1f | %.1f | %.1f | %.1f (%.1f-%.1f) |", lib.delete_prefix("#{File.dirname(ROOT)}/"), m[:process_ms_s],
               m[:poller_ms_s], m[:waits_s], m[:periodic_polls_s], median(m[:loads]), m[:loads].min, m[:loads].max)
      end
      <<~MD
        ## Idle producers: CPU per second of wall time (issue 44 item 4)

        Generated by `bin/bench idle #{@argv.join(" ")}` on #{Time.now.utc.strftime("%Y-%m-%d %H:%M UTC")}:
        #{@opts[:producers]} :fd producers sending nothing, #{@opts[:seconds]} s measured after #{@opts[:settle]} s settling;
        each of #{@opts[:reps]} repetitions runs every tree below once, alternately, each in a fresh process. Medians.
        Process CPU includes librdkafka's own threads (several per producer); the poller column is the
        sluice.poller thread alone. The figures depend on the machine and its load.

        | lib | process CPU ms/s | poller CPU ms/s | poller waits/s | periodic polls/s | load (1 min) |
        |---|---:|---:|---:|---:|---:|
        #{rows.join("\n")}

        Peer: #{PEER}
      MD
    end
  end
end

Bench::Idle.new(ARGV).run if $PROGRAM_NAME == __FILE__
