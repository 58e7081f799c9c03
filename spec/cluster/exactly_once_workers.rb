# frozen_string_literal: true

require "open3"
require "set"
require_relative "../support/worker_supervisor"

# The worker processes of spec/cluster/exactly_once_spec.rb: slots of
# spec/support/scenarios/crash_consumer.rb in exactly-once mode, each slot
# with its own transactional.id, which a restarted worker takes over (its
# init fences the SIGKILLed predecessor and aborts its open transaction).
# What the workers say on stdout is read by a thread of its own; the example
# waits on it (WorkerSupervisor#await), never on the clock.
module ExactlyOnceWorkers
  class Run < WorkerSupervisor
    Slot = Struct.new(:index, :txn_id, :worker, :generation, :kill_armed)

    attr_reader :slots, :committed, :committed_at, :failed, :reloaded, :kills

    # @param env [Hash] the workers' environment (TXN_ID is the slot's)
    # @param slots [Integer] worker processes
    # @param txn_prefix [String] slot i's transactional.id is "<prefix>-<i>"
    # @param log_dir [String, nil] where to write each worker's stdout lines
    #   (timed) and stderr, for diagnosis
    def initialize(env, slots, txn_prefix, log_dir: nil)
      super()
      @env = env
      @log_dir = log_dir
      @all = [] # [slot index, worker] of every worker started
      @started = now
      @owned = {} # worker => Set of partitions
      @committed = Hash.new(0) # payload => committed transactions that reported it
      @committed_at = {} # payload => when the last of them was reported (monotonic clock)
      @failed = Hash.new(0) # error message => times
      @reloaded = Hash.new(0) # error code => times
      @kills = [] # [slot index, inputs committed by then]
      @commit_times = [] # when each committed line came
      @exited = [] # [slot index, stderr] of a worker that exited on its own
      @finishing = false
      @pace = 0.0
      @last_line = {} # worker => [line, when]
      @slots = Array.new(slots) { |i| Slot.new(i, "#{txn_prefix}-#{i}", nil, 0, false) }
      @slots.each { |slot| start(slot) }
      start_reading
    end

    # Until a worker says something (at most seconds).
    def next_line(seconds)
      @lock.synchronize do
        raise_exited
        @changed.wait(@lock, seconds)
        raise_exited
      end
    end

    # What the group looks like, each slot's last line and how long ago (a
    # failure's message: a stuck worker's last line is "open ..."). Under the lock.
    def state
      owners = @owned.to_h { |worker, partitions| [slot_of(worker)&.index, partitions.to_a.sort] }
      last = @slots.to_h do |slot|
        line, at = @last_line[slot.worker]
        [slot.index, line ? format("%<line>s %<ago>.1fs ago", line: line.to_s[0, 60], ago: now - at) : "nothing yet"]
      end
      "#{progress} inputs committed, partitions owned per slot #{owners}, each slot's last line #{last}"
    end

    # Inputs reported committed (every report counted). Under the lock.
    def progress = @committed.values.sum

    # The longest time (s) without a committed transaction from since to the last one. Under the lock.
    def longest_pause_since(since)
      [since, *@commit_times.select { |at| at > since }].each_cons(2).map { |a, b| b - a }.max || 0.0
    end

    # The longest time (s) without a committed transaction between from and
    # till (a commit after till ends the last pause; none: it lasts until till). Under the lock.
    def longest_pause_between(from, till) = longest_pause(@commit_times, from, till)

    # Partitions some worker owns. Under the lock.
    def owned = @owned.values.reduce(Set.new, :|)

    # Workers owning at least one partition. Under the lock.
    def owners = @owned.count { |_, partitions| partitions.any? }

    # SIGKILLs slot index's worker at its next "open" line (inside a
    # transaction: its copies produced, its input offsets added, not
    # committed), and starts another with the same transactional.id.
    def kill_inside_transaction(index, seconds = 60)
      slot = @slots.fetch(index)
      generation = @lock.synchronize do
        slot.kill_armed = true
        slot.generation
      end
      await("slot #{index}'s worker SIGKILLed inside a transaction", seconds) { slot.generation > generation }
    end

    # From now on each worker's batch takes at least seconds (0: as fast as it goes).
    def pace(seconds)
      @lock.synchronize do
        @pace = seconds
        @slots.each { |slot| slot.worker.tell("pace #{seconds}") }
      end
    end

    # Closes every worker's stdin: each stops reading, closes and exits.
    # @return [Array<Process::Status>]
    def finish
      @lock.synchronize { @finishing = true }
      statuses = @slots.map { |slot| slot.worker.finish(60) }
      stop_reading
      statuses
    end

    def kill_all
      dump_stacks
      @lock.synchronize { @finishing = true }
      @slots.each { |slot| slot.worker.kill if slot.worker&.running? }
      stop_reading
      write_stderr
    end

    def stderr_of_all = @slots.map { |slot| "slot #{slot.index}:\n#{slot.worker.stderr_output}" }.join("\n")

    private

    def start(slot)
      slot.worker = ConsumerGroups::Worker.new(@env.merge("TXN_ID" => slot.txn_id, "BATCH_SECONDS" => @pace.to_s), @lines)
      @all << [slot.index, slot.worker]
      log(slot.worker, "started (slot #{slot.index}, generation #{slot.generation})")
    end

    def log(worker, line)
      return unless @log_dir

      @logs ||= {}
      @logs[worker] ||= begin
        n = @all.index { |_, started| started.equal?(worker) }
        File.open(File.join(@log_dir, "slot#{@all[n].first}-#{n}.out"), "w")
      end
      @logs[worker].write(format("%<at>.3f %<line>s\n", at: now - @started, line: line))
      @logs[worker].flush
    end

    # Native stacks of the live workers (gdb), in log_dir: where a stuck one waits.
    def dump_stacks
      return unless @log_dir

      @slots.each do |slot|
        next unless slot.worker&.running?

        pid = slot.worker.pid
        output, = Open3.capture2e("gdb", "-p", pid.to_s, "-batch", "-ex", "thread apply all bt")
        File.write(File.join(@log_dir, "slot#{slot.index}-#{pid}.stacks"), output)
      end
    rescue SystemCallError => e
      warn "no stacks: #{e.message}"
    end

    # Each worker's stderr in log_dir (every worker has exited).
    def write_stderr
      return unless @log_dir

      @all.each_with_index do |(index, worker), n|
        File.write(File.join(@log_dir, "slot#{index}-#{n}.err"), worker.stderr_output)
      end
    end

    def stop_reading
      super
      @logs&.each_value(&:close)
    end

    def raise_exited
      return if @exited.empty?

      raise "a worker exited on its own:\n#{@exited.map { |index, stderr| "slot #{index}:\n#{stderr}" }.join("\n")}"
    end

    def slot_of(worker) = @slots.find { |slot| slot.worker.equal?(worker) }

    def record(worker, line)
      log(worker, line.to_s)
      @last_line[worker] = [line, now]
      slot = slot_of(worker)
      return exited(slot, worker) if line == :exited
      return unless slot # what a SIGKILLed worker wrote last

      word, rest = line.split(" ", 2)
      case word
      when "assigned" then (@owned[worker] ||= Set.new).merge(numbers(rest))
      when "revoked" then @owned[worker]&.subtract(numbers(rest))
      when "committed" then record_commit(rest)
      when "failed" then @failed[rest] += 1
      when "reloaded" then @reloaded[rest] += 1
      when "open" then kill(slot) if slot.kill_armed
      end
    end

    def record_commit(payloads)
      at = now
      @commit_times << at
      payloads.split.each do |payload|
        @committed[payload] += 1
        @committed_at[payload] = at
      end
    end

    # At the "open" line itself, from this thread: the transaction is open.
    def kill(slot)
      slot.kill_armed = false
      @owned.delete(slot.worker)
      slot.worker.kill
      @kills << [slot.index, progress]
      slot.generation += 1
      start(slot)
    end

    def exited(slot, worker)
      @owned.delete(worker)
      @exited << [slot.index, worker.stderr_output] if slot && !@finishing
    end
  end
end
