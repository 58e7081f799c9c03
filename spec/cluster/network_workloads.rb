# frozen_string_literal: true

require "set"
require_relative "../support/worker_supervisor"

# The clients that run through a network fault in spec/cluster/network_faults_spec.rb:
# producers at a steady pace, and what they sent, to compare with what a
# reader finds in the log afterwards.
module NetworkWorkloads
  # Client timeouts sized to the faults: a request unanswered for
  # socket.timeout.ms is given up (the connection closed and the request
  # retried), so a fault window longer than it makes the clients notice it;
  # message.timeout.ms is far beyond the window, so no message may fail.
  TIMEOUTS = { "socket.timeout.ms": 2_500, "message.timeout.ms": 60_000, "transaction.timeout.ms": 60_000 }.freeze
  KEYS = 30 # order is checked per key

  # What the example waits for, set by the producing threads: counts, each
  # change signalled, so nothing waits by sleeping.
  class Progress
    include ConditionWait

    def initialize
      @lock = Mutex.new
      @changed = ConditionVariable.new
      @counts = Hash.new(0)
    end

    def add(name, count = 1)
      @lock.synchronize do
        @counts[name] += count
        @changed.broadcast
      end
    end

    def [](name) = @lock.synchronize { @counts[name] }

    # Waits until the block, given the counts, is true.
    def await(seconds, what)
      @lock.synchronize do
        wait_for(seconds) { yield(@counts) } or raise "#{what}: not within #{seconds}s (#{@counts})"
      end
    end
  end

  # Paces a loop at `per_second` steps until #stop; a pause in the loop
  # (a produce waiting for room) is made up at once, in a burst.
  class Pacer
    def initialize(per_second)
      @per_second = per_second
      @stop = false
    end

    def stop = @stop = true

    def each_step
      started = now
      done = 0
      until @stop
        due = ((now - started) * @per_second).to_i
        while done < due && !@stop
          yield done
          done += 1
        end
        sleep(0.01) # pacing: the next steps fall due
      end
    end

    private

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # An idempotent producer sending numbered, keyed messages ("seq" payload,
  # key "k<seq % KEYS>") at a steady rate from a thread of its own.
  class IdempotentLoad
    attr_reader :handles

    def initialize(producer, topic, progress, per_second:)
      @producer = producer
      @topic = topic
      @progress = progress
      @handles = []
      @pacer = Pacer.new(per_second)
      @thread = Thread.new { @pacer.each_step { |seq| produce(seq) } }
    end

    # Stops producing. @return [Array<Delivery::Handle>] one per message, in seq order
    def finish
      @pacer.stop
      @thread.value
      @handles
    end

    private

    def produce(seq)
      @handles << @producer.produce_async(topic: @topic, key: "k#{seq % KEYS}", payload: seq.to_s)
      @progress.add(:idempotent)
    end
  end

  # A transactional producer committing batches of numbered, keyed messages,
  # one every INTERVAL, from a thread of its own; a transaction that fails is
  # recorded (its messages must never be visible) and the next one goes on.
  # No catching up after a stall: a burst of transactions proves nothing more.
  class TransactionalLoad
    BATCH = 50
    INTERVAL = 0.1 # s between two transactions

    attr_reader :outcomes, :failures

    def initialize(producer, topic, progress)
      @producer = producer
      @topic = topic
      @progress = progress
      @outcomes = Hash.new { |hash, key| hash[key] = [] } # :committed, :failed => [batch, ...]
      @failures = Hash.new(0)
      @stop = false
      @thread = Thread.new { run }
    end

    def finish
      @stop = true
      @thread.value
      self
    end

    private

    def run
      step = 0
      until @stop
        transact((step * BATCH...(step + 1) * BATCH).to_a)
        step += 1
        sleep(INTERVAL) # pacing, not waiting for anything
      end
    end

    def transact(batch)
      @producer.transaction do
        batch.each { |seq| @producer.produce_async(topic: @topic, key: "k#{seq % KEYS}", payload: seq.to_s) }
      end
      @outcomes[:committed] << batch
      @progress.add(:committed)
    rescue Sluice::Errors::TransactionError, Sluice::Errors::ProduceError => e
      @failures["#{e.class.name.split("::").last}: #{e.message[0, 120]}"] += 1
      @outcomes[:failed] << batch
      @progress.add(:failed)
    end
  end

  # A consumer group of two processes (spec/support/scenarios/crash_consumer.rb,
  # at least once), reading the idempotent producer's topic through the proxies.
  class Group < WorkerSupervisor
    def initialize(topic, partitions)
      super()
      @partitions = Set.new(0...partitions)
      @seen = Hash.new(0) # payload => times handed out
      @owned = Hash.new { |hash, key| hash[key] = Set.new }
      @rebalances = 0
      env = { "KAFKA_BROKERS" => TestCluster::BROKERS, "SLUICE_POLLING_MODE" => TestKafka::MODE.to_s,
              "GROUP" => "sluice-netfault-#{SecureRandom.hex(4)}", "INPUT" => topic }
      @workers = Array.new(2) { ConsumerGroups::Worker.new(env, @lines) }
      start_reading
    end

    # Until both members own partitions, and together all of them.
    def await_members(seconds = 60)
      await("both members sharing every partition", seconds) do
        @workers.all? { |worker| @owned[worker].any? } && @owned.values.reduce(:|) == @partitions
      end
      read { @rebalances = 0 } # from here on, rebalances the faults caused
    end

    def rebalances = read { @rebalances }

    # Until every one of payloads was handed out at least once.
    # @return [Boolean] false when seconds passed first (#tally says what is missing)
    def await_seen(payloads, seconds = 120)
      await("every message handed out", seconds, raise_on_timeout: false) { payloads.all? { |payload| @seen.key?(payload) } }
    end

    # @return [Hash] missing:, more_than_once: (payloads handed out twice or more)
    def tally(payloads)
      read { { missing: payloads.count { |payload| !@seen.key?(payload) }, more_than_once: payloads.count { |payload| @seen[payload] > 1 } } }
    end

    def finish
      @workers.each(&:finish)
      stop_reading
    end

    def kill
      @workers.each { |worker| worker.kill if worker.running? }
      stop_reading
    end

    # Under the lock.
    def state = "#{@seen.size} handed out, #{@rebalances} rebalances"

    private

    def raise_exited
      raise "the member processes exited\n#{@workers.map(&:stderr_output).join("\n")}" if @workers.none?(&:running?)
    end

    def record(worker, line)
      return if line == :exited

      word, rest = line.split(" ", 2)
      case word
      when "seen" then @seen[rest] += 1
      when "assigned" then (@rebalances += 1) && @owned[worker].merge(numbers(rest))
      when "revoked" then @owned[worker].subtract(numbers(rest))
      end
    end
  end

  # What was sent against what a reader found: the key of a message is
  # "k<seq % KEYS>", so its payload says which key it had.
  module Tally
    module_function

    # @param expected [Array<Integer>] the sequence numbers that must be in the log, once each
    # @param found [Array<Array<Integer>>] per partition, the sequence numbers in log order
    # @param not_committed [Array<Integer>] sequence numbers that must not be in the log
    def figures(expected, found, not_committed: [])
      seqs = found.flatten
      { lost: (expected - seqs).size, duplicated: seqs.size - seqs.uniq.size,
        reordered: found.sum { |log| reordered(log) }, not_committed_visible: (seqs & not_committed).size }
    end

    # Messages found after a later one of the same key.
    def reordered(log)
      log.group_by { |seq| seq % KEYS }.sum { |_key, seqs| seqs.each_cons(2).count { |a, b| b < a } }
    end
  end
end
