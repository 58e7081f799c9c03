# frozen_string_literal: true

require_relative "parallel_fault_runs"

# spec/cluster/failure_faults_spec.rb's member processes: what
# ParallelFaultRuns records, and what each run processed OK ("ok <payload>":
# its block returned) and dead-lettered ("dead <partition>/<offset>": the
# dead letter acknowledged).
class FailureFaultRuns < ParallelFaultRuns
  def initialize(env)
    @ok = Hash.new { |hash, worker| hash[worker] = [] }
    @ok_distinct = Set.new
    @dead = Set.new
    super
  end

  # Different payloads processed OK, and input positions dead-lettered. Under the lock (#await's block).
  def ok_distinct = @ok_distinct.size
  def dead_distinct = @dead.size

  # @return [Hash{String => Integer}] payload => times processed OK, over every run
  def ok_tally = read { @ok.values.flatten.tally }

  # Payloads processed OK by a run that was SIGKILLed (or that exited without finishing).
  def ok_by(workers) = read { workers.flat_map { |worker| @ok[worker] }.to_set }

  def state = "#{super}; #{ok_distinct} processed OK, #{dead_distinct} dead-lettered"

  private

  def record(worker, line)
    super
    return unless line.is_a?(String)

    if line.start_with?("ok ")
      payload = line.delete_prefix("ok ")
      @ok[worker] << payload
      @ok_distinct << payload
    elsif line.start_with?("dead ")
      @dead << line.delete_prefix("dead ")
    end
  end
end
