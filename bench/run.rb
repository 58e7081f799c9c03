# frozen_string_literal: true

# The benchmark matrix: producers x polling mode (x variant), one fresh process
# per cell (bench/cell.rb), each repetition running every contender (thread,
# fd and, at the steady message count, C's cbench) in an order rotated from
# one repetition to the next, median and min-max reported; the 1-minute load
# average is recorded beside each cell. Writes bench/results/<time>.json, bench/RESULTS.md and
# bench/RESULTS.png (gnuplot), and prints the table as it goes.
#
#   ruby bench/run.rb [--messages 1000,20000] [--reps 3] [--producers 1,2,5,10,25]
#                     [--variants async,many_sync,one_thread] [--scale] [--no-cbench]

require "json"
require "open3"
require "optparse"
require "rbconfig"
require "fileutils"
require "etc"
require_relative "environment"

module Bench
  class Run
    include Environment

    ROOT = File.expand_path("..", __dir__)
    CBENCH_SRC = File.expand_path("../shared/tools/cbench/cbench.c", ROOT)

    def initialize(opts)
      @opts = opts
      @cells = []
      @started = Time.now
    end

    def run
      FileUtils.mkdir_p(File.join(ROOT, "bench/results"))
      @cbench = build_cbench if @opts[:cbench]
      @c_results = Hash.new { |h, producers| h[producers] = [] }
      @opts[:messages].each { |messages| @opts[:variants].each { |variant| matrix(variant, messages) } }
      scale if @opts[:scale]
      ceiling if @cbench
      write_results
    end

    private

    def matrix(variant, messages)
      puts "== #{variant}: #{messages} messages x 100 bytes per producer, #{@opts[:reps]} reps"
      @opts[:producers].each do |producers|
        @opts[:reps].times do |rep|
          # C runs among the modes, not after them all, so a load that comes and goes weighs on every contender
          with_c = @cbench && messages == steady && variant == @opts[:variants].first
          contenders = (with_c ? %i[thread fd c] : %i[thread fd]).rotate(rep)
          contenders.each do |mode|
            next c_cell(producers, rep) if mode == :c

            cell(mode: mode, producers: producers, messages: messages, variant: variant, rep: rep)
          end
        end
      end
      print_table(variant, messages)
    end

    def cell(mode:, producers:, messages:, variant:, rep:)
      args = ["--mode", mode.to_s, "--producers", producers.to_s, "--messages", messages.to_s, "--variant", variant]
      load = load1
      out, err, status = Open3.capture3(RbConfig.ruby, File.join(__dir__, "cell.rb"), *args)
      raise "cell #{args.join(" ")} failed:\n#{err}\n#{out}" unless status.success?

      result = JSON.parse(out.lines.last, symbolize_names: true).merge(rep: rep, load1: load)
      @cells << result
      puts format("  %-10s %-6s producers=%-4d rep=%d  %9d msg/s  cpu %5.2f us/msg  p50 %7.1f ms  p99 %7.1f ms  " \
                  "ruby threads %3d  os threads %4d  rss +%6.1f MB connected, +%6.1f MB after  load %.2f",
                  variant, mode, producers, rep, result[:rate], result[:cpu_us_per_msg], result[:p50_ms], result[:p99_ms],
                  result[:ruby_threads], result[:os_threads], mb(result[:rss_connected_kb] - result[:rss_before_kb]),
                  mb(result[:rss_after_kb] - result[:rss_before_kb]), load)
      result
    end

    # One cbench run in the repetition's rotation (fd mode, the steady message count).
    def c_cell(producers, rep)
      load = load1
      result = cbench(@cbench, producers, steady).merge("rep" => rep, "load1" => load)
      @c_results[producers] << result
      puts format("  %-10s %-6s producers=%-4d rep=%d  %9d msg/s  cpu %5.2f us/msg  load %.2f", "cbench", "c", producers, rep,
                  result["rate"].to_f, c_cpu_us(result), load)
    end

    # The 1-minute load average when a cell starts: printed beside its row.
    def load1 = File.read("/proc/loadavg").split.first.to_f

    def c_cpu_us(result) = result["cpu_s"].to_f * 1e6 / result["delivered"].to_f

    def print_table(variant, messages)
      puts
      puts table(variant, messages)
      puts
    end

    def table(variant, messages)
      rows = ["| producers | thread msg/s (min-max) | fd msg/s (min-max) | improvement (medians) | " \
              "fd/thread, paired (min-max) | Ruby threads thread/fd | load (1 min) |",
              "|---:|---:|---:|---:|---:|---:|---:|"]
      @opts[:producers].each do |producers|
        thread = pick(variant, :thread, producers, messages)
        fd = pick(variant, :fd, producers, messages)
        next if thread.empty? || fd.empty?

        ratios = paired_ratios(thread, fd)
        rows << format("| %d | %s | %s | %+.0f%% | %.2f (%.2f-%.2f) | %d / %d | %s |", producers, summary(thread), summary(fd),
                       (median(fd.map { _1[:rate] }) / median(thread.map { _1[:rate] }).to_f - 1) * 100,
                       median(ratios), ratios.min, ratios.max, thread.first[:ruby_threads], fd.first[:ruby_threads],
                       loads(thread + fd))
      end
      rows.join("\n")
    end

    def detail_table
      rows = ["| messages | variant | mode | producers | msg/s | CPU us/msg | p50 ms | p99 ms | Ruby threads | OS threads | " \
              "RSS growth connected | RSS growth after run |",
              "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
      @cells.group_by { |c| [c[:messages_per_producer], c[:variant], c[:mode], c[:producers]] }.each do |(messages, variant, mode, producers), cells|
        rows << format("| %d | %s | %s | %d | %d | %.2f | %.1f | %.1f | %d | %d | %.1f MB | %.1f MB |", messages, variant, mode, producers,
                       median(cells.map { _1[:rate] }), median(cells.map { _1[:cpu_us_per_msg] }),
                       median(cells.map { _1[:p50_ms] }), median(cells.map { _1[:p99_ms] }), cells.first[:ruby_threads],
                       median(cells.map { _1[:os_threads] }), mb(median(cells.map { _1[:rss_connected_kb] - _1[:rss_before_kb] })),
                       mb(median(cells.map { _1[:rss_after_kb] - _1[:rss_before_kb] })))
      end
      rows.join("\n")
    end

    SCALE = [100, 1000].freeze

    # 100 and 1,000 producers on one FD poller; thread mode as far as the machine allows.
    def scale
      puts "== scale: 100 messages per producer"
      [@opts[:reps], 3].min.times.to_a.product(SCALE, %i[fd thread]).each do |rep, producers, mode|
        result = cell(mode: mode, producers: producers, messages: 100, variant: "async", rep: rep)
        stats = result[:poller_stats]
        next unless stats

        puts format("    poller: %d wake-ups served, %d waits, %.1f us poller CPU per wake-up",
                    stats[:wakeups], stats[:waits], result[:poller_us_per_wakeup])
      rescue RuntimeError => e
        puts "  #{mode} #{producers}: did not run on this machine (#{e.message.lines.first&.strip})"
      end
    end

    # Raw librdkafka in C on the same broker: the ceiling (../shared/tools/cbench).
    def build_cbench
      return puts("== cbench not found at #{CBENCH_SRC}") unless File.exist?(CBENCH_SRC)

      c_benchmark(CBENCH_SRC)
    end

    # C's cells ran within the repetitions (c_cell); here their medians, and one handle's memory.
    def ceiling
      @ceiling = @c_results.to_h do |producers, results|
        rate = median(results.map { _1["rate"].to_f })
        puts format("  cbench producers=%-3d %9d msg/s (median of %d)", producers, rate, results.size)
        [producers, { rate: rate, results: results }]
      end
      @handle_rss = [1, 25].to_h { |producers| [producers, cbench(@cbench, producers, 1)["rss_kb"].to_i] }
    end

    def cbench(binary, producers, messages)
      out, status = Open3.capture2(binary, "--mode", "fd", "--producers", producers.to_s, "--messages", messages.to_s,
                                   "--topic", "sluice-bench", "--brokers", brokers, "-q")
      line = out.lines.grep(/^RESULT/).last or raise "cbench printed no RESULT (exit #{status.exitstatus})"
      line.split.drop(1).to_h { |kv| kv.split("=", 2) }
    end

    def write_results
      stamp = @started.strftime("%Y%m%d-%H%M%S")
      data = { started: @started, machine: machine, options: @opts, cells: @cells, ceiling: @ceiling, handle_rss_kb: @handle_rss }
      json = File.join(ROOT, "bench/results/#{stamp}.json")
      File.write(json, JSON.pretty_generate(data))
      chart
      results = File.join(ROOT, "bench/RESULTS.md")
      File.write(results, markdown + kept_blocks(results))
      puts "wrote #{json}, bench/RESULTS.md#{@chart ? ", bench/RESULTS.png" : ""}"
    end

    # The other runners' blocks (bin/bench consumer, bin/bench latency) are kept as they were.
    def kept_blocks(results)
      return "" unless File.exist?(results)

      File.read(results).to_enum(:scan, BLOCK).map { "\n#{Regexp.last_match[0]}" }.join
    end

    def chart
      return unless system("command -v gnuplot >/dev/null")

      dat = File.join(ROOT, "tmp/bench-chart.dat")
      File.write(dat, @opts[:producers].map do |producers|
        [producers, median(pick("async", :thread, producers, steady).map { _1[:rate] }),
         median(pick("async", :fd, producers, steady).map { _1[:rate] }), @ceiling&.dig(producers, :rate) || "NaN"].join(" ")
      end.join("\n"))
      script = <<~GP
        set terminal png size 900,500 noenhanced
        set output "#{File.join(ROOT, "bench/RESULTS.png")}"
        set title "sluice: msg/s vs producers (#{steady} x 100 B per producer, produce_async)"
        set xlabel "producers"; set ylabel "msg/s"; set logscale x; set grid; set key left top
        set xtics (#{@opts[:producers].join(", ")})
        plot "#{dat}" using 1:2 with linespoints title "thread mode", "" using 1:3 with linespoints title "fd mode", "" using 1:4 with linespoints title "C ceiling (cbench)"
      GP
      _, status = Open3.capture2e("gnuplot", stdin_data: script)
      @chart = status.success?
    end

    def markdown
      <<~MD
        # Benchmark results

        Generated by `bin/bench #{@opts[:argv].join(" ")}` on #{@started.utc.strftime("%Y-%m-%d %H:%M UTC")}.
        Machine: #{machine[:cpu]}, #{machine[:cores]} cores, #{machine[:memory]}; Ruby #{RUBY_VERSION}, librdkafka #{machine[:librdkafka]},
        Kafka #{machine[:kafka]} (single KRaft broker on loopback), topic with 1 partition, 100-byte payloads.
        Each cell is a fresh process; in each of the #{@opts[:reps]} repetitions every contender (thread, fd, and C at
        #{steady} messages) runs once, in an order rotated from one repetition to the next; medians (min-max).
        "fd/thread, paired" is the median of the per-repetition ratios of the two cells run back to back.
        Read CPU per message and the ratios to C first: they are what reproduces. Absolute msg/s figures
        depend on the machine and on its load (shared here: the 1-minute load average is given beside each
        row); msg/s is measured from the first produce call to the last delivery report.

        #{ceiling_text}
        #{targets_text}
        #{variant_sections}
        #{enqueue_text}
        #{scale_text}
        ## Every cell (medians)

        #{detail_table}

        CPU is process CPU (Ruby threads plus librdkafka's own threads) per delivered message.
        RSS growth is from before the producers were created to after each had delivered one warm-up
        message ("connected"), and to after the run ("after run": includes every delivery report object
        the benchmark kept). A pending delivery handle is #{@cells.first&.dig(:handle_bytes)} bytes (object + in-flight slot).
      MD
    end

    def variant_sections
      @opts[:messages].product(@opts[:variants]).map do |messages, variant|
        "## #{variant}, #{messages} messages per producer (#{variant_text(variant)})\n\n#{table(variant, messages)}\n"
      end.join("\n")
    end

    def scale_text
      cells = @cells.select { _1[:messages_per_producer] == 100 }
      return "" if cells.empty?

      rows = SCALE.product(%w[fd thread]).filter_map do |producers, mode|
        picked = cells.select { _1[:producers] == producers && _1[:mode] == mode }
        next if picked.empty?

        wakeup = picked.filter_map { _1[:poller_us_per_wakeup] }
        format("| %d | %s | %d | %d | %d | %s |", producers, mode, median(picked.map { _1[:rate] }), picked.first[:ruby_threads],
               median(picked.map { _1[:os_threads] }), wakeup.empty? ? "-" : format("%.1f", median(wakeup)))
      end
      <<~MD
        ## Scale: many producers, 100 messages each (medians of #{cells.map { _1[:rep] }.uniq.size})

        | producers | mode | msg/s | Ruby threads | OS threads | poller CPU per wake-up (us) |
        |---:|---|---:|---:|---:|---:|
        #{rows.join("\n")}
      MD
    end

    def ceiling_text
      return "" unless @ceiling

      rows = @ceiling.map do |producers, c|
        async, many = %w[async many_async].map { |variant| pick(variant, :fd, producers, steady) }
        c_cpu = median(c[:results].map { c_cpu_us(_1) })
        cpu = ->(cells) { median(cells.map { _1[:cpu_us_per_msg] }) }
        vs_c = lambda do |cells|
          next "- | - | - | -" if cells.empty?

          rate = median(cells.map { _1[:rate] })
          format("%.2f | %.1fx | %d | %.0f%%", cpu.call(cells), cpu.call(cells) / c_cpu, rate, rate * 100.0 / c[:rate])
        end
        c_rates = c[:results].map { _1["rate"].to_f }
        format("| %d | %.2f | %s | %s | %d (%d-%d) | %s |", producers, c_cpu, vs_c.call(async), vs_c.call(many),
               c[:rate], c_rates.min, c_rates.max, loads(async + many, c[:results].map { _1["load1"] }))
      end
      <<~MD
        ## CPU per message, and ratios to raw librdkafka in C (cbench, fd mode, same run)

        Medians of #{@opts[:reps]} repetitions (C's min-max msg/s). CPU is the whole process's per delivered message,
        for C as for sluice: the figure that moves least with the machine's other load. "CPU / C" is sluice's
        CPU per message over C's; "msg/s / C" its throughput as a share of C's in the same repetitions.

        | producers | C CPU µs/msg | produce_async CPU µs/msg | CPU / C | msg/s | msg/s / C | produce_many_async CPU µs/msg | CPU / C | msg/s | msg/s / C | C msg/s (min-max) | load (1 min) |
        |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
        #{rows.join("\n")}

        cbench VmRSS with 1 handle: #{@handle_rss[1]} kB, with 25 handles: #{@handle_rss[25]} kB
        (#{format("%.1f", (@handle_rss[25] - @handle_rss[1]) / 1024.0)} MB for 24 more handles).
      MD
    end

    # Issue 17's producer goals, each against this run's figures.
    def targets_text
      lines = [c_target, fd_thread_target, enqueue_target].compact
      lines.empty? ? "" : "## Targets (issues 17 and 33)\n\n#{lines.join("\n")}\n"
    end

    def met(yes) = yes ? "met" : "missed"

    # Issue 33: produce_async at half of C's rate or more, at each producer count (medians of this run).
    def c_target
      shares = (@ceiling || {}).filter_map do |producers, c|
        fd = median(pick("async", :fd, producers, steady).map { _1[:rate] })
        [producers, fd * 100.0 / c[:rate]] if fd.positive?
      end
      return if shares.empty?

      format("- produce_async / cbench, fd, medians: %s; target 50%% at each: %s",
             shares.map { |p, share| format("%d: %.0f%%", p, share) }.join(", "), met(shares.all? { _2 >= 50 }))
    end

    def fd_thread_target
      ratios = @opts[:producers].filter_map do |producers|
        paired = paired_ratios(pick("async", :thread, producers, steady), pick("async", :fd, producers, steady))
        [producers, median(paired)] unless paired.empty?
      end
      return if ratios.empty?

      format("- fd/thread, produce_async, paired medians: %s; target >= 0.97 at each: %s",
             ratios.map { |p, r| format("%d: %.2f", p, r) }.join(", "), met(ratios.all? { _2 >= 0.97 }))
    end

    def enqueue_target
      ratio = enqueue_ratio(:fd, 1) or return
      format("- produce_many_async / produce_async, enqueue rate, 1 producer, fd: %.2fx; target 1.3x: %s", ratio, met(ratio >= 1.3))
    end

    # Messages per second handed to librdkafka (until the last produce call returned), many_async over async.
    def enqueue_ratio(mode, producers)
      async, many = %w[async many_async].map { |v| median(pick(v, mode, producers, steady).filter_map { _1[:enqueue_rate] }) }
      many.to_f / async if async.positive? && many.positive?
    end

    def enqueue_text
      rows = @opts[:producers].product(%w[fd thread]).filter_map do |producers, mode|
        ratio = enqueue_ratio(mode, producers) or next
        rates = %w[async many_async].map { |v| median(pick(v, mode, producers, steady).filter_map { _1[:enqueue_rate] }) }
        delivered = %w[async many_async].map { |v| median(pick(v, mode, producers, steady).map { _1[:rate] }) }
        format("| %d | %s | %d | %d | %.2fx | %.2fx |", producers, mode, *rates, ratio, delivered[1].to_f / delivered[0])
      end
      return "" if rows.empty?

      <<~MD
        ## Enqueue rate: produce_many_async against produce_async (#{steady} messages per producer)

        Messages per second handed to librdkafka, from the first produce call until the last one returned; the
        last column is the ratio of the two variants' msg/s to the last delivery report (the tables above),
        where the broker's acknowledgements bound both.

        | producers | mode | produce_async | produce_many_async (batches of 1,000) | ratio | ratio to the last report |
        |---:|---|---:|---:|---:|---:|
        #{rows.join("\n")}
      MD
    end

    def variant_text(variant)
      { "async" => "each producer driven by its own Ruby thread: produce_async, then wait on every handle",
        "many_sync" => "each producer's thread calls produce_many_sync with batches of 1,000",
        "many_async" => "each producer's thread calls produce_many_async with batches of 1,000, then waits on every handle",
        "one_thread" => "one Ruby thread drives all producers round-robin with produce_async, then waits" }.fetch(variant)
    end

    def pick(variant, mode, producers, messages)
      @cells.select do |c|
        c[:variant] == variant && c[:mode] == mode.to_s && c[:producers] == producers && c[:messages_per_producer] == messages
      end
    end

    # The largest message count: throughput rather than latency (the chart and the C ceiling use it).
    def steady = @opts[:messages].max

    # fd/thread of the two cells of each repetition, run back to back: the
    # machine's slow drifts cancel out of a ratio.
    def paired_ratios(thread_cells, fd_cells)
      fd_cells.filter_map do |f|
        t = thread_cells.find { _1[:rep] == f[:rep] }
        f[:rate].to_f / t[:rate] if t
      end
    end

    def summary(cells)
      rates = cells.map { _1[:rate] }
      format("%d (%d-%d)", median(rates), rates.min, rates.max)
    end

    def mb(kilobytes) = kilobytes / 1024.0

    # The 1-minute load averages recorded when the row's cells started: median (min-max).
    def loads(cells, extra = [])
      values = cells.filter_map { _1[:load1] } + extra.compact
      values.empty? ? "-" : format("%.1f (%.1f-%.1f)", median(values), values.min, values.max)
    end
  end
end

opts = { messages: [1_000], reps: 3, producers: [1, 2, 5, 10, 25], variants: %w[async], scale: false, cbench: true, argv: ARGV.dup }
OptionParser.new do |o|
  o.on("--messages LIST", Array, "messages per producer (default 1000; 20000 for steady figures; 1000,20000 for both)") do |v|
    opts[:messages] = v.map { Integer(_1) }
  end
  o.on("--reps N", Integer, "repetitions per cell (default 3)") { |v| opts[:reps] = v }
  o.on("--producers LIST", Array, "producer counts (default 1,2,5,10,25)") { |v| opts[:producers] = v.map(&:to_i) }
  o.on("--variants LIST", Array, "async,many_async,many_sync,one_thread (default async)") { |v| opts[:variants] = v }
  o.on("--all", "all three variants and the scale run") do
    opts[:variants] = %w[async many_sync one_thread]
    opts[:scale] = true
  end
  o.on("--scale", "also 100 and 1,000 producers with 100 messages each") { opts[:scale] = true }
  o.on("--no-cbench", "skip the C ceiling") { opts[:cbench] = false }
end.parse!
Bench::Run.new(opts).run
