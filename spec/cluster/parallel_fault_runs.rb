# frozen_string_literal: true

require "set"
require "timeout"

# spec/cluster/parallel_faults_spec.rb's member processes and what they saw.
class ParallelFaultRuns
  def initialize(env)
    @env = env
    @lines = Queue.new
    @seen = Hash.new { |hash, worker| hash[worker] = [] } # worker => payloads in start order
    @workers = []
    @distinct = Set.new
  end

  attr_reader :workers

  def start
    worker = ConsumerGroups::Worker.new(@env, @lines)
    @workers << worker
    worker
  end

  # Reads lines until the block is true, at most seconds.
  def await(what, seconds)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
    until yield
      raise "#{what}: not within #{seconds}s (#{total_seen} handed out; #{state})" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      worker, line = next_line
      record(worker, line) if worker
    end
  end

  def total_seen = @seen.sum { |_, list| list.size }

  # How many different payloads were handed out.
  def distinct = @distinct.size

  # Each run: its pid, whether it runs, how many it handed out.
  def state = @workers.map { |worker| "#{worker.pid} #{worker.running? ? "running" : "gone"} #{@seen[worker].size}" }.join(", ")

  # @return [Hash{String => Integer}] payload => times handed out, over every run
  def tally = @seen.values.flatten.tally

  # Per run and key: a message seen for the first time in the run after a later one of its key.
  def violations
    @seen.sum do |_, payloads|
      highest = Hash.new(-1)
      first_time = {}
      payloads.count do |payload|
        next false if first_time.key?(payload)

        first_time[payload] = true
        _, key, seq = payload.split(":")
        seq = Integer(seq)
        (seq < highest[key]).tap { highest[key] = [highest[key], seq].max }
      end
    end
  end

  def kill_all = @workers.each { |worker| worker.kill if worker.running? }

  private

  def next_line
    Timeout.timeout(0.5) { @lines.pop }
  rescue Timeout::Error
    nil
  end

  def record(worker, line)
    return unless line.is_a?(String) && line.start_with?("seen ")

    payload = line.delete_prefix("seen ")
    @seen[worker] << payload
    @distinct << payload
  end
end
