# frozen_string_literal: true

module Soak
  # The soak's table (printed a row at a time), its JSON, its plot and its
  # verdict against the bounds.
  class Report
    COLUMNS = [["min", :minute, 3], ["t(s)", :at, 5], ["RSS MB", :rss_mb, 7], ["fds", :fds, 4], ["threads", :threads, 7],
               ["p50 ms", :p50_ms, 7], ["p99 ms", :p99_ms, 8], ["lag", :lag, 6], ["sent", :sent, 7], ["read", :read, 7]].freeze

    def initialize(options, bounds)
      @options = options
      @bounds = bounds
      @rows = []
      puts "soak: #{options[:minutes]} min, #{options[:rate]} msg/s from #{options[:producers]} idempotent producers, " \
           "a group of 2 consumers, :#{options[:mode]} mode, a fault every #{options[:fault_every]}s (#{Faults::OUTAGE}s each)"
      puts "| #{COLUMNS.map { |title, _, width| title.rjust(width) }.join(" | ")} | faults |"
      puts "|#{COLUMNS.map { |_, _, width| "-" * (width + 1) }.join("-|")}-|--------|"
    end

    def row(sample)
      @rows << sample
      puts format_row(sample)
    end

    # @param totals [Hash] Load#drain's
    # @param final [Hash] a sample after the drain
    # @return [Boolean] within the bounds
    def finish(totals, final)
      puts "#{format_row(final.merge(minute: "end"))}  (after the drain)"
      verdicts = check(totals, final)
      puts "soak totals: #{totals.except(:lost_messages).map { |name, value| "#{name} #{value}" }.join(", ")}"
      totals[:lost_messages].each { |lost| puts "soak lost: #{lost.map { |name, value| "#{name} #{value.inspect}" }.join(", ")}" }
      verdicts.each { |verdict| puts "soak #{verdict[:ok] ? "ok" : "FAILED"}: #{verdict[:text]}" }
      write(totals, final, verdicts)
      verdicts.all? { |verdict| verdict[:ok] }
    end

    private

    def format_row(sample)
      cells = COLUMNS.map { |_, key, width| (sample[key].nil? ? "-" : sample[key]).to_s.rjust(width) }
      "| #{cells.join(" | ")} | #{Array(sample[:faults]).join("; ")} |"
    end

    # Growth from the first minute (warm-up) to the last one (the clients
    # still running: after the drain their threads are gone), and loss.
    def check(totals, _final)
      base = @rows.first
      last = @rows.last
      rss_limit = (base[:rss_mb] + [base[:rss_mb] * @bounds[:rss_percent] / 100.0, @bounds[:rss_mb]].max).round(1)
      [
        verdict(last[:rss_mb] <= rss_limit,
                "RSS #{base[:rss_mb]} -> #{last[:rss_mb]} MB (bound: +#{@bounds[:rss_percent]}% or +#{@bounds[:rss_mb]} MB, #{rss_limit} MB)"),
        verdict(last[:fds] <= base[:fds] + @bounds[:fds], "fds #{base[:fds]} -> #{last[:fds]} (bound: +#{@bounds[:fds]})"),
        verdict(last[:threads] <= base[:threads] + @bounds[:threads],
                "threads #{base[:threads]} -> #{last[:threads]} (bound: +#{@bounds[:threads]})"),
        verdict(totals[:lost] <= @bounds[:lost] && totals[:unresolved].zero?, "lost #{totals[:lost]}, unresolved #{totals[:unresolved]} (bound: 0)"),
        verdict(totals[:failed] <= @bounds[:failed], "failed deliveries #{totals[:failed]} #{totals[:failed_codes]} (bound: 0)")
      ]
    end

    def verdict(passed, text) = { ok: passed, text: text }

    def write(totals, final, verdicts)
      FileUtils.mkdir_p(File.dirname(@options[:json]))
      File.write(@options[:json], JSON.pretty_generate(options: @options, bounds: @bounds, rows: @rows, final: final,
                                                       totals: totals, ok: verdicts.all? { |v| v[:ok] }, verdicts: verdicts))
      puts "soak: wrote #{@options[:json]}"
      plot
    end

    def plot
      return puts("soak: no gnuplot, no plot (apt-get install gnuplot-nox)") unless system("command -v gnuplot >/dev/null")

      dat = File.join(ROOT, "tmp", "#{File.basename(@options[:plot], ".*")}.dat") # the plot's input, not a result
      lines = @rows.map { |r| [*r.values_at(:minute, :rss_mb, :fds, :threads), r[:p50_ms] || "NaN", r[:p99_ms] || "NaN", r[:lag]].join(" ") }
      File.write(dat, lines.join("\n"))
      _, status = Open3.capture2e("gnuplot", stdin_data: gnuplot_script(dat))
      puts(status.success? ? "soak: wrote #{@options[:plot]}" : "soak: gnuplot failed")
    end

    def gnuplot_script(dat)
      <<~GP
        set terminal png size 1000,700 noenhanced
        set output "#{@options[:plot]}"
        set multiplot layout 2,1 title "sluice soak: #{@options[:minutes]} min, #{@options[:rate]} msg/s, :#{@options[:mode]} mode, a fault every #{@options[:fault_every]}s"
        set grid; set xlabel "minute"; set key left top
        set ylabel "RSS MB"; set y2label "fds, threads"; set ytics nomirror; set y2tics; set yrange [0:*]; set y2range [0:*]
        plot "#{dat}" using 1:2 with linespoints title "RSS MB", "" using 1:3 axes x1y2 with linespoints title "fds", "" using 1:4 axes x1y2 with linespoints title "threads"
        set ylabel "latency ms (log)"; set logscale y; set y2label "lag (messages)"; set yrange [*:*]
        plot "#{dat}" using 1:5 with linespoints title "p50 ms", "" using 1:6 with linespoints title "p99 ms", "" using 1:7 axes x1y2 with linespoints title "lag"
        unset multiplot
      GP
    end
  end
end
