# frozen_string_literal: true

require "set"
require_relative "../support/worker_supervisor"

# spec/cluster/parallel_faults_spec.rb's member processes and what they saw.
# Members are SIGKILLed on purpose: one that exits does not fail the run.
class ParallelFaultRuns < WorkerSupervisor
  def initialize(env)
    super()
    @env = env
    @seen = Hash.new { |hash, worker| hash[worker] = [] } # worker => payloads in start order
    @workers = []
    @distinct = Set.new
    start_reading
  end

  def start
    worker = ConsumerGroups::Worker.new(@env, @lines)
    @lock.synchronize { @workers << worker }
    worker
  end

  # Payloads handed out, every time counted. Under the lock (#await's block).
  def total_seen = @seen.sum { |_, list| list.size }

  # How many different payloads were handed out. Under the lock.
  def distinct = @distinct.size

  # Whether payload was handed out. Under the lock.
  def seen?(payload) = @distinct.include?(payload)

  # Each run: its pid, whether it runs, how many it handed out. Under the lock.
  def state
    runs = @workers.map { |worker| "#{worker.pid} #{worker.running? ? "running" : "gone"} #{@seen[worker].size}" }
    "#{total_seen} handed out; #{runs.join(", ")}"
  end

  # @return [Hash{String => Integer}] payload => times handed out, over every run
  def tally = read { @seen.values.flatten.tally }

  # @return [Hash{String => Array<String>}] each payload's runs that handed it out: "pid@place/of" (its place
  #   among what the run handed out, and how many that was), for a duplicate's story
  def sightings(payloads)
    read { payloads.to_h { |payload| [payload, @seen.filter_map { |worker, list| sighting(worker, list, payload) }] } }
  end

  # Per run and key: a message seen for the first time in the run after a later one of its key.
  def violations = read { @seen.sum { |_, payloads| violations_in(payloads) } }

  def kill_all
    read { @workers.dup }.each { |worker| worker.kill if worker.running? }
    stop_reading
  end

  private

  def raise_exited = nil

  def sighting(worker, list, payload) = (place = list.index(payload)) && "#{worker.pid}@#{place}/#{list.size}"

  def violations_in(payloads)
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

  def record(worker, line)
    return unless line.is_a?(String) && line.start_with?("seen ")

    payload = line.delete_prefix("seen ")
    @seen[worker] << payload
    @distinct << payload
  end
end
