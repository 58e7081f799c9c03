# frozen_string_literal: true

require "securerandom"

# A group member process (spec/support/scenarios/crash_consumer.rb) is
# SIGKILLed mid-stream, twice, and started again in the same group each time;
# the last one runs until the group's committed offsets reach the end of the
# input, then closes. At least once (each_message, auto commit): every input
# message was seen by some run, duplicates are counted. Exactly once
# (consume-transform-produce with a transactional producer, offsets committed
# in its transactions): the output read with read_committed holds each input
# message exactly once.
#
# Each example prints its figures on one line starting with "crash recovery".
RSpec.describe "Consumer crash recovery: a member SIGKILLed mid-stream and restarted", :kafka, timeout: 150 do
  include ConsumerGroups

  let(:input) { "sluice-spec-cgroup" }
  let(:output) { "sluice-spec-cgroup-out" }
  let(:tag) { SecureRandom.hex(4) }
  let(:group) { "sluice-spec-crash-#{tag}" }
  let(:messages) { 6_000 }
  let(:kills) { 2 }
  # Messages a run reports before it is killed: well short of the end.
  let(:kill_after) { messages / 5 }

  # @return [Hash{Integer => Integer}] the input's end offsets once every message is there
  def produce_input
    producer = build_producer
    messages.times { |i| producer.produce_async(topic: input, partition: i % partition_count(input), payload: "#{tag}:#{i + 1}") }
    producer.flush
    with_outsider(group) { |outsider| end_offsets(outsider, input) }
  end

  def lag(checker, ends)
    committed = checker.committed.fetch(input)
    ends.sum { |partition, offset| [offset - committed.fetch(partition), 0].max }
  end

  def next_line(lines)
    Timeout.timeout(0.5) { lines.pop }
  rescue Timeout::Error
    nil
  end

  # A worker's line: payloads seen or committed, a failed transaction.
  # @return [Boolean] a line where a SIGKILL may land (:open: inside a transaction)
  def record(item, outcome)
    worker, line = item
    raise "a consumer process exited on its own:\n#{worker.stderr_output}" if line == :exited && worker.equal?(outcome[:current])
    return false unless line.is_a?(String)

    outcome[:failed] += 1 if line.start_with?("failed ")
    payloads = line[/\A(?:seen|committed) (.*)/, 1]&.split || []
    payloads.each { |payload| outcome[:reported][payload] += 1 }
    worker.reported(payloads.size)
    kill_point = line.start_with?(outcome[:kill_on] == :open ? "open " : "seen ")
    kill_point && worker.equal?(outcome[:current])
  end

  # Runs a worker, SIGKILLs it once it reported kill_after messages (at its
  # next kill_on line: :seen or :open) and starts another, `kills` times;
  # then lets the last one run until the group's lag is 0 and closes it.
  # @return [Hash] :reported (payload => times), :runs (progress of each),
  #   :left_at_kill (the group's lag right after each kill), :failed (transactions)
  def run_workers(env, ends, kill_on:)
    lines = Queue.new
    outcome = { reported: Hash.new(0), left_at_kill: [], failed: 0, kill_on: kill_on }
    runs = [outcome[:current] = ConsumerGroups::Worker.new(env, lines)]
    checker = outsider(group, input)
    checked_at = monotonic_now
    loop do
      kill_point = record(next_line(lines), outcome)
      if kill_point && kill_due?(runs)
        runs.last.kill
        outcome[:left_at_kill] << lag(checker, ends)
        runs << (outcome[:current] = ConsumerGroups::Worker.new(env, lines))
      elsif runs.size > kills && monotonic_now - checked_at > 0.5
        checked_at = monotonic_now
        break if lag(checker, ends).zero?
      end
    end
    finish(runs.last, lines, outcome)
    outcome.merge(runs: runs.map(&:progress)).except(:current, :kill_on)
  ensure
    checker&.close
    runs&.each { |worker| worker.kill if worker.running? } # the example failed
  end

  def kill_due?(runs) = runs.size <= kills && runs.last.progress >= kill_after

  def finish(worker, lines, outcome)
    status = worker.finish
    expect(status).to be_success, "the last run failed (#{status.inspect}):\n#{worker.stderr_output}"
    until (item = lines.pop) == [worker, :exited]
      record(item, outcome)
    end
  end

  def env(extra = {})
    { "KAFKA_BROKERS" => TestKafka::BROKERS, "SLUICE_POLLING_MODE" => TestKafka::MODE.to_s, "GROUP" => group,
      "INPUT" => input }.merge(extra)
  end

  def expected = (1..messages).map { |seq| "#{tag}:#{seq}" }

  it "at least once: every message is seen by some run (duplicates counted)" do
    start_group_at_end(group, input)
    ends = produce_input
    outcome = run_workers(env, ends, kill_on: :seen)

    seen = outcome[:reported].select { |payload, _| payload.start_with?("#{tag}:") }
    lost = expected - seen.keys
    duplicates = seen.values.sum - seen.size
    puts "crash recovery (#{TestKafka::MODE}, at least once): produced #{messages}, consumed #{seen.values.sum} " \
         "(per run #{outcome[:runs].join(" + ")}), duplicates #{duplicates}, lost #{lost.size}, " \
         "#{kills} SIGKILLs (messages left behind each: #{outcome[:left_at_kill].join(", ")})"

    # Each kill was mid-stream, after the group had committed some progress.
    expect(outcome[:left_at_kill]).to all(be_between(1, messages - 1))
    expect(lost).to eq([])
    expect(seen.keys - expected).to eq([])
  end

  it "exactly once: the committed output holds every input message once" do
    start_group_at_end(group, input)
    output_start = with_outsider(group) { |outsider| end_offsets(outsider, output) }
    ends = produce_input
    # SIGKILLed inside a transaction: its copies are in the output, not committed.
    outcome = run_workers(env("OUTPUT" => output, "TXN_ID" => "sluice-spec-crash-#{tag}"), ends, kill_on: :open)

    copies = tagged(read_to_end(output, output_start, isolation: "read_committed"), tag).tally
    written = tagged(read_to_end(output, output_start, isolation: "read_uncommitted"), tag).size
    reported = outcome[:reported].values.sum
    duplicates = copies.values.sum - copies.size
    lost = (1..messages).count { |seq| !copies.key?(seq) }
    failed = outcome[:failed]
    puts "crash recovery (#{TestKafka::MODE}, exactly once): produced #{messages}, consumed in committed transactions " \
         "#{reported} as reported (per run #{outcome[:runs].join(" + ")}), output written #{written} (aborted copies " \
         "included), read committed #{copies.values.sum}: duplicates #{duplicates}, lost #{lost}; #{kills} SIGKILLs " \
         "(messages left behind each: #{outcome[:left_at_kill].join(", ")}), failed transactions #{failed}"

    expect(outcome[:left_at_kill]).to all(be_between(1, messages - 1))
    expect(duplicates).to eq(0)
    expect(lost).to eq(0)
    expect(copies.keys - (1..messages).to_a).to eq([])
  end
end
