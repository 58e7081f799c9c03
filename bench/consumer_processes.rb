# frozen_string_literal: true

require "rbconfig"

module Bench
  # The processes scenario of bench/consumer_cell.rb: the way past one GVL.
  # This process has loaded sluice and created no client; it forks N children
  # (--launch spawn: starts N fresh Rubies instead, to compare), and each
  # creates ONE consumer of the same group: a client is never inherited across
  # a fork (sluice refuses one), so the children make their own.
  #
  # The clock starts only once the group holds every child: with
  # group.initial.rebalance.delay.ms=0 the first child to join would
  # otherwise read alone until the others' rebalance, so each child pauses
  # what it is assigned until the parent's "go". Each child then reports its
  # count, CLOCK_MONOTONIC (one clock for every process) and its
  # CLOCK_PROCESS_CPUTIME_ID (its threads included) over a pipe: at its first
  # message, every REPORT_EVERY messages (each batch) and at the last message
  # its partitions hold (their watermarks, read before the "go": waiting for
  # an EOF would add the broker's fetch.wait.max.ms, 500 ms). The parent says
  # "stop" once the reports add up to the target, or every child has read
  # all of its partitions, and then, from every report, finds the stretch when every child was reading: from the
  # last child's first message to the first moment one had run out (or the
  # group had read the target). msg/s is the group's over that stretch, CPU
  # per message each child's. The reports cost one write per REPORT_EVERY
  # messages, and nothing in a child waits for the parent.
  class ConsumerProcesses < ConsumerCell
    REPORT_EVERY = 500

    def run = @opts[:scenario] == :process ? run_process : run_processes

    private

    # --- the parent --------------------------------------------------------------

    Child = Struct.new(:pid, :reports, :control, :buffer, :assigned, :at_end, :progress, :done, :cpu_between)

    def run_processes
      group = group_id
      children = Array.new(@opts[:processes]) { |i| launch(i, group) }
      deadline = now + @opts[:timeout]
      listen(children, deadline) { formed?(children) }
      before = [now, broker_cpu, machine_busy]
      say_to(children, "go")
      listen(children, deadline) { enough?(children) }
      broker = { wall_s: now - before[0], cpu_s: before[1] && broker_cpu&.-(before[1]), machine_s: machine_busy - before[2] }
      say_to(children, "stop")
      listen(children, deadline) { children.all?(&:done) }
      processes_report(children, broker)
    rescue StandardError
      children&.each { |c| Process.kill(:KILL, c.pid) unless c.done }
      raise
    ensure
      children&.each { |c| Process.wait(c.pid) }
    end

    def launch(index, group)
      reports, report_w = IO.pipe
      control_r, control = IO.pipe
      pid = if @opts[:launch] == :spawn
              Process.spawn(RbConfig.ruby, File.join(__dir__, "consumer_cell.rb"), *child_args(index, group),
                            { 3 => report_w, 4 => control_r, out: File::NULL })
            else
              fork { exit!(process_in_child(index, group, report_w, control_r, [reports, control])) }
            end
      [report_w, control_r].each(&:close)
      Child.new(pid, reports, control, +"", 0, false, [], false, [])
    end

    def process_in_child(index, group, report, control, parents_ends)
      parents_ends.each(&:close)
      @opts.merge!(scenario: :process, index: index, group: group)
      @report = report
      @control = control
      run_process
      0
    rescue Exception => e # rubocop:disable Lint/RescueException -- a forked child must not run the parent's code on
      warn "child #{index}: #{e.class}: #{e.message}\n#{e.backtrace.first(5).join("\n")}"
      1
    end

    def child_args(index, group)
      ["--scenario", "process", "--index", index.to_s, "--group", group, "--api", @opts[:api], "--mode", @opts[:mode].to_s,
       "--runner", @opts[:runner].to_s, "--topic", @opts[:topic], "--max-items", @opts[:max_items].to_s,
       "--max-wait", @opts[:max_wait].to_s, *@opts[:kafka].flat_map { |k, v| ["-X", "#{k}=#{v}"] }]
    end

    # Reads the children's reports until the block holds.
    def listen(children, deadline)
      until yield
        open = children.reject(&:done)
        raise "a child ended early or is still at work after #{@opts[:timeout]} s" if open.empty? || now > deadline

        ready, = IO.select(open.map(&:reports), nil, nil, [deadline - now, 0].max)
        (ready || []).each { |pipe| take(open.find { |c| c.reports.equal?(pipe) }) }
      end
    end

    def take(child)
      child.buffer << child.reports.read_nonblock(65_536)
      *lines, child.buffer = child.buffer.split("\n", -1)
      lines.each { |line| heard(child, *line.split) }
    rescue EOFError
      child.done = true
    end

    def heard(child, kind, *values)
      case kind
      when "A" then child.assigned = Integer(values[0])
      when "R" then child.progress << [Integer(values[0]), Float(values[1]), Float(values[2])]
      when "E" then child.at_end = true
      when "C" then child.cpu_between << Float(values[0])
      end
    end

    # Every child holds partitions (as many as can) and together they hold them all.
    def formed?(children)
      children.sum(&:assigned) == @opts[:partitions] && children.count { _1.assigned.positive? } == [children.size, @opts[:partitions]].min
    end

    def enough?(children) = children.sum { |c| c.progress.last&.first.to_i } >= @opts[:messages] || children.all?(&:at_end)

    def say_to(children, word) = children.each { |c| c.control.puts(word) }

    # The broker's CPU (utime + stime) in seconds: it shares the machine's cores with the children.
    # nil when it is not a local one of bin/kafka's.
    def broker_cpu
      pid = Integer(File.read(@opts[:broker_pid_file]))
      File.read("/proc/#{pid}/stat").split(")").last.split.values_at(11, 12).sum(&:to_i) / clock_ticks
    rescue Errno::ENOENT, ArgumentError
      nil
    end

    # CPU the machine spent running anything (/proc/stat: user, nice, system, irq, softirq), in seconds.
    def machine_busy
      File.read("/proc/stat")[/^cpu (.*)$/, 1].split.map(&:to_i).values_at(0, 1, 2, 5, 6).sum / clock_ticks
    end

    def clock_ticks = Etc.sysconf(Etc::SC_CLK_TCK).to_f

    def processes_report(children, broker)
      start = children.map { _1.progress.first[1] }.max
      finish = [crossing(children), *children.map { steady_end(_1) }].min
      per = children.map { |c| per_process(c, start, finish) }
      wall = finish - start
      {
        scenario: "processes", processes: children.size, launch: @opts[:launch], api: @opts[:api], mode: @opts[:mode],
        runner: @opts[:runner], kafka: @opts[:kafka], target: @opts[:messages], messages: per.sum { _1[:window_messages] },
        elapsed_s: wall.round(4), rate: (per.sum { _1[:window_messages] } / wall).round, per_process: per,
        cores_used: (per.sum { _1[:cpu_s] } / wall).round(2),
        # from "go" to "stop": the broker, and whatever else ran on the machine (the broker too if not known)
        broker: broker[:cpu_s] && { cpu_s: broker[:cpu_s].round(3), cores: (broker[:cpu_s] / broker[:wall_s]).round(2) },
        machine_busy_cores: (broker[:machine_s] / broker[:wall_s]).round(2),
        other_cores: ((broker[:machine_s] - broker[:cpu_s].to_f - children.sum { _1.cpu_between.then { |go, stop| stop - go } }) /
                      broker[:wall_s]).round(2),
        cores: Etc.nprocessors, ruby: RUBY_VERSION, librdkafka: Sluice::Native.librdkafka_version
      }
    end

    # When the children's reports, taken in time order, first add up to the target.
    def crossing(children)
      latest = Hash.new(0)
      children.flat_map { |c| c.progress.map { |count, at, _| [at, c, count] } }.sort_by(&:first).each do |at, child, count|
        latest[child] = count
        return at if latest.values.sum >= @opts[:messages]
      end
      Float::INFINITY
    end

    # A child that read all its partitions held: its report before the last
    # one (each_batch's last batch, short, waited max_wait for more).
    def steady_end(child) = child.progress[child.at_end ? -2 : -1][1]

    def per_process(child, start, finish)
      from = child.progress.select { |_, at, _| at <= start }.last
      to = child.progress.select { |_, at, _| at <= finish }.last
      messages = to[0] - from[0]
      first, last = child.progress.values_at(0, -1)
      { messages: last[0], elapsed_s: (last[1] - first[1]).round(4), window_messages: messages, cpu_s: (to[2] - from[2]).round(4),
        cpu_us_per_msg: ((to[2] - from[2]) / messages * 1e6).round(3) }
    end

    # --- a child -------------------------------------------------------------------

    def run_process
      @report ||= IO.for_fd(3).tap { _1.sync = true }
      @control ||= IO.for_fd(4)
      @seen = 0
      @target = REPORT_EVERY
      consumer = build_consumer(@opts[:index], @opts[:group])
      follow_group(consumer)
      consumer.subscribe(@topic)
      listener = Thread.new { obey(consumer) }
      read(consumer)
      listener.join
    ensure
      consumer&.close
    end

    def follow_group(consumer)
      consumer.monitor.subscribe("consumer.partitions_assigned") do |event|
        event[:partitions].each { |topic, partitions| partitions.each { consumer.pause(topic, _1) } } unless @go
        say("A", consumer.assignment.values.sum(&:size))
      end
      consumer.monitor.subscribe("consumer.partitions_revoked") { say("A", consumer.assignment.values.sum(&:size)) }
    end

    def obey(consumer)
      @control.each_line do |word|
        case word.strip
        when "go"
          say("C", process_cpu)
          @go = true
          @share = share(consumer)
          consumer.assignment.each { |topic, partitions| partitions.each { consumer.resume(topic, _1) } }
        when "stop"
          say("C", process_cpu)
          @finished = true # the poll API's loop looks at it
          return consumer.stop
        end
      end
    end

    # Called by ConsumerCell#read at the first message and when @seen reaches @target:
    # every REPORT_EVERY messages, and at the child's last one.
    def milestone
      say("R", @seen, now, process_cpu)
      say("E") if @seen >= @share
      @target = [@seen + REPORT_EVERY, @share].min
    end

    # What this child's partitions hold (a fresh group reads them from the start).
    def share(consumer)
      consumer.assignment.sum { |topic, partitions| partitions.sum { consumer.query_watermark_offsets(topic, _1).then { |low, high| high - low } } }
    end

    def process_cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)

    def say(*words) = @report.write("#{words.join(" ")}\n")
  end
end
