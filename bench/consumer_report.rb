# frozen_string_literal: true

module Bench
  # The tables of bench/consumer_run.rb: for the terminal and for the
  # consumer block of bench/RESULTS.md. Reads @opts, @cells and @ceiling.
  module ConsumerReport
    private

    # --- tables -----------------------------------------------------------------

    def throughputs(consumers: nil, api: nil, mode: nil, tuned: false, profile: false)
      @cells.select do |c|
        c[:scenario] == "throughput" && c[:tuned] == tuned && !c[:profile].nil? == profile &&
          (consumers.nil? || c[:consumers] == consumers) && (api.nil? || c[:api] == api) && (mode.nil? || c[:mode] == mode.to_s)
      end
    end

    def c_rate(consumers, tuned: false)
      median(@ceiling.select { |c| c[:consumers] == consumers && c[:tuned] == tuned }.map { |c| c[:rate] })
    end

    def matrix_table(tuned: false)
      rows = ["| consumers | API | mode | msg/s | C msg/s (ccbench) | sluice / C | CPU µs/msg (Ruby + librdkafka) | " \
              "Ruby threads (ours) | OS threads | RSS at end |",
              "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"]
      (tuned ? [1] : @opts[:consumers]).each do |n|
        c = c_rate(n, tuned: tuned)
        @opts[:apis].product(@opts[:modes]).each do |api, mode|
          cells = throughputs(consumers: n, api: api, mode: mode, tuned: tuned)
          next if cells.empty?

          rate = median(cells.map { _1[:rate] })
          t = cells.first[:threads]
          rows << format("| %d | %s | %s | %s | %s | %s | %.2f (%.2f + %.2f) | %d (%d) | %d | %.0f MB |", n, api, mode, rates(cells),
                         c.positive? ? c_rates(n, tuned) : "-", c.positive? ? format("%.0f%%", rate * 100.0 / c) : "-",
                         median(cells.map { _1[:cpu_us_per_msg] }), median(cells.map { _1.dig(:cpu_us_per_msg_by_group, :ruby) }),
                         median(cells.map { _1.dig(:cpu_us_per_msg_by_group, :librdkafka) }), t[:ruby], t[:polling], t[:os],
                         median(cells.map { _1[:rss_last_kb] }) / 1024.0)
        end
      end
      rows.join("\n")
    end

    def c_rates(consumers, tuned) = rates(@ceiling.select { |c| c[:consumers] == consumers && c[:tuned] == tuned })

    def rates(cells)
      list = cells.map { _1[:rate] }
      list.size == 1 ? list.first.to_s : format("%d (%d-%d)", median(list), list.min, list.max)
    end

    # Issue 17's goals, each against this run's figures.
    def targets_text
      c = c_rate(1)
      lines = ConsumerRun::TARGETS.map do |api, goal|
        rate = median(throughputs(consumers: 1, api: api.to_s).map { _1[:rate] })
        next if rate.zero?

        half = api == :each_batch && c.positive? ? format(" or half of C (%d)", c / 2) : ""
        met = rate >= goal || (!half.empty? && rate >= c / 2)
        format("- %s, 1 consumer (median of both modes): %d msg/s; target %d%s: %s", api, rate, goal, half, met ? "met" : "missed")
      end
      best = throughputs(consumers: 6).group_by { _1[:api] }.transform_values { |cells| median(cells.map { _1[:rate] }) }.max_by(&:last)
      if best
        lines << format("- 6 consumers in one process (%s, median of both modes): %d msg/s; target %d: %s",
                        best[0], best[1], ConsumerRun::SIX_TARGET, best[1] >= ConsumerRun::SIX_TARGET ? "met" : "missed")
      end
      lines.compact.join("\n")
    end

    def tuned_text
      return "" if throughputs(tuned: true).empty?

      <<~MD
        ### The same with `#{tuned_settings.map { |k, v| "#{k}=#{v}" }.join(" ")}` (sluice and ccbench)

        #{matrix_table(tuned: true)}
      MD
    end

    def profile_table
      cells = throughputs(profile: true) + throughputs(profile: true, tuned: true)
      return "" if cells.empty?

      rows = cells.map do |c|
        p = c[:profile]
        format("| %s | %s | %d | %.2f | %.2f | %.2f s in %d waits | %d (%d empty) | %.2f | %d |", c[:api], c[:tuned] ? "tuned" : "default",
               c[:rate], p[:refill_us_per_msg], p[:rest_us_per_msg], p[:wait_s], p[:waits], p[:refills], p[:empty_refills],
               c[:allocations_per_msg], c[:gc_runs])
      end
      <<~MD
        ### Where the time goes (1 consumer, fd, the Inbox timed in the benchmark process)

        | API | librdkafka settings | msg/s | Inbox#refill µs/msg | rest µs/msg | waiting on the fd | refills | allocations/msg | GC runs |
        |---|---|---:|---:|---:|---:|---:|---:|---:|
        #{rows.join("\n")}

        Inbox#refill is the native drain (`Native::Consumer#consume`: queue poll, one `Sluice::Message` and its payload
        String per message) plus storing the offsets of what was processed; "rest" is Ruby handing the messages out and the
        block (here: counting).
      MD
    end

    def crowd_table
      cells = @cells.select { _1[:scenario] == "crowd" }
      return "" if cells.empty?

      rows = cells.map do |c|
        t = c[:threads]
        format("| %s | %s | %d | %d | %d | %d | %d/%d |", c[:mode], c[:runner] == "fiber" ? "fibers (Async)" : "a thread each",
               t[:ruby], t[:polling], t[:os], t[:librdkafka], c[:consumed], c[:in_topic])
      end
      <<~MD
        ### 25 consumers + 25 producers in one process

        Counted while the producers send 1,000 messages each and the consumers (one group, a 25-partition topic) read.
        "Ruby threads" includes the main thread and the consumers' reader threads; "ours" are sluice's polling threads.

        | polling mode | consumers driven by | Ruby threads | ours (polling) | OS threads | librdkafka's | consumed |
        |---|---|---:|---:|---:|---:|---:|
        #{rows.join("\n")}
      MD
    end

    def idle_table
      cells = @cells.select { _1[:scenario] == "idle" }
      return "" if cells.empty?

      rows = cells.map do |c|
        s = c[:context_switches]
        format("| %s | %s | %d | %d | %s | %d | %d | %d | %.1f |", c[:mode], c[:runner], c[:refills], c[:waits], poller_text(c[:poller]),
               s[:"application (Ruby)"] || 0, s[:"sluice polling"] || 0, s[:librdkafka] || 0, c[:cpu_ms])
      end
      <<~MD
        ### An idle consumer (#{cells.first[:seconds]} s, subscribed to an empty partition)

        | mode | reader | Inbox refills | Inbox waits begun | poller | reader wake-ups¹ | polling thread wake-ups¹ | librdkafka wake-ups¹ | CPU ms |
        |---|---|---:|---:|---|---:|---:|---:|---:|
        #{rows.join("\n")}

        ¹ context switches (voluntary + involuntary) of those threads over the window. The reader waits on the
        consumer queue's fd for up to max.poll.interval.ms / 2 (150 s by default), so an idle reader is not woken;
        the poller's periodic poll (polling.fd.periodic_poll_interval, 1 s) serves the consumer's main queue.
      MD
    end

    def processes_table
      cells = @cells.select { _1[:scenario] == "processes" }
      rows = cells.map do |c|
        one = cells.find { _1[:api] == c[:api] && _1[:processes] == 1 }
        per = c[:per_process]
        each = ->(&block) { per.map { |p| block.call(p) }.join(" / ") }
        format("| %d | %s | %d | %s | %s | %s | %s | %.2f | %s | %.2f |", c[:processes], c[:api], c[:rate],
               one ? format("%.2f", c[:rate].to_f / one[:rate]) : "-", each.call { _1[:messages] },
               each.call { format("%.2f", _1[:cpu_us_per_msg]) },
               one ? each.call { |p| format("%.2f", p[:cpu_us_per_msg] / one[:per_process].first[:cpu_us_per_msg]) } : "-",
               c[:cores_used], c[:broker] ? format("%.2f", c.dig(:broker, :cores)) : "-", c[:other_cores])
      end
      <<~MD
        | processes | API | msg/s | × 1 process | messages per process | CPU µs/msg per process | ÷ 1 process | cores: the processes | the broker | anything else |
        |---:|---|---:|---:|---:|---:|---:|---:|---:|---:|
        #{rows.join("\n")}
      MD
    end

    def processes_section
      return "" if @cells.none? { _1[:scenario] == "processes" }

      <<~MD
        ### Processes: one consumer each, one group

        One fresh process loads sluice and forks N children (no client exists before the fork); each child creates
        one consumer (#{@opts[:modes].first}) of one fresh group and reads, each_message or each_batch as in the rows above,
        until the group has read #{@opts[:messages]} messages. Every child holds its assigned partitions paused until all N
        are in the group, then reads. msg/s and each child's CPU (CLOCK_PROCESS_CPUTIME_ID, its threads included) are
        taken over the stretch when all N were reading: from the last child's first message to the first moment one had
        read all it was given (its last batch, which waits max_wait for more, left out). Cores: CPU seconds per second,
        the children's over that stretch; the broker's (/proc/PID/stat) and anything else's on the machine (/proc/stat
        less the children and the broker) from the parent's "go" to its "stop". #{machine[:cores]} cores on the machine.

        #{processes_table}
      MD
    end

    def poller_text(stats)
      return "thread mode (own thread, 1 s waits)" unless stats

      format("%d wake-ups, %d periodic polls", stats[:wakeups], stats[:periodic_polls])
    end

    def profile_text(profile)
      format("refill %.2f us/msg, rest %.2f us/msg, waited %.2f s in %d waits, %d refills (%d empty)", profile[:refill_us_per_msg],
             profile[:rest_us_per_msg], profile[:wait_s], profile[:waits], profile[:refills], profile[:empty_refills])
    end

    def markdown
      <<~MD
        ## Consumer

        Generated by `#{["bin/bench consumer", *@opts[:argv]].join(" ")}` on #{@started.utc.strftime("%Y-%m-%d %H:%M UTC")}.
        Machine: #{machine[:cpu]}, #{machine[:cores]} cores, #{machine[:memory]}; Ruby #{RUBY_VERSION}, librdkafka #{machine[:librdkafka]},
        Kafka #{machine[:kafka]} (single KRaft broker on loopback). Topic `#{@opts[:topic]}`: #{ConsumerRun::PARTITIONS} partitions,
        #{@opts[:messages]} messages of 100 bytes, filled once and read again by each cell. Each cell is a fresh process:
        N consumers in one fresh group (auto.offset.reset=earliest), each read by #{@opts[:runner] == :fiber ? "a fiber (Async)" : "its own Ruby thread"};
        msg/s from the first message to the #{@opts[:messages]}-th in total. The C column is ccbench
        (`../shared/tools/ccbench`: a thread per `rd_kafka_consumer_poll` consumer) in the same run, median (min-max) of
        #{@opts[:ccbench_reps] || 1} C runs per consumer count, with the prefetch settings sluice gives librdkafka by default
        (#{sluice_prefetch.empty? ? "none on this librdkafka" : sluice_prefetch.map { |k, v| "`#{k}=#{v}`" }.join(", ")}), so both fetch alike. #{@opts[:reps]} rep(s) of the sluice cells;
        the machine is shared and noisy: compare within one run.

        #{matrix_table}

        #{targets_text}

        CPU is process CPU (Process.times) per message from the first message to the last. In brackets, per thread
        from its start to the last message: "Ruby" is the reading threads (CLOCK_THREAD_CPUTIME_ID: the drain into
        Message objects, each_message/each_batch, the block), librdkafka its own threads (/proc/self/task: fetch, parse,
        queues, prefetch beyond the last message included). ccbench's CPU figure is for the whole process, group join
        and close included: #{ceiling_cpu_text}.
        Ruby threads counted at the last message: main, one reader per consumer, and ours (the poller in :fd, one per
        consumer in :thread); OS threads include librdkafka's (about 5 per consumer).

        #{tuned_text}
        #{profile_table}
        #{crowd_table}
        #{idle_table}
        #{processes_section}
      MD
    end

    def ceiling_cpu_text
      list = @ceiling.reject { _1[:tuned] }.map { |c| format("%d consumer(s) %.2f µs/msg", c[:consumers], c[:cpu_us_per_msg]) }
      list.empty? ? "not measured" : list.join(", ")
    end
  end
end
