# frozen_string_literal: true

require "securerandom"
require_relative "failure_fault_runs"
require_relative "../support/scenarios/failing"

# Issue 56, item 6: retries and dead letters under faults on the three-node
# cluster. Three member processes (spec/support/scenarios/crash_consumer.rb
# with DEAD_LETTER) run each_message(concurrency: 64, ordering: :key,
# retries: 3 attempts, dead_letter:) over keyed, numbered messages with a
# handler that fails 1% of them on every attempt and 5% on their first
# attempt in a process (Failing: decided by the payload). One member is
# SIGKILLed and replaced, and a node is SIGKILLed and restarted. Then, from
# the members' "ok" lines and the dead-letter topic read whole: no input is
# lost (each processed OK once or more, or dead-lettered), the permanent
# failures and only they are dead letters, each with its origin headers, and
# a message in both would have to be one a SIGKILLed member processed. The
# :fd run reads on threads, the :thread run on fibers (FIBERS=1, Async).
#
# Prints one line starting with "failure policies under faults" with the counts.
RSpec.describe "Failure policies under faults", :cluster, timeout: 240 do
  messages = 12_000
  partitions = 6
  keys = 600

  include ClusterScenario

  before(:context) do
    @tag = SecureRandom.hex(4)
    @topic, @dlq = TestCluster.create_topics(%W[sluice-failure-faults-#{@tag} sluice-failure-faults-#{@tag}-dlq], partitions)
  end

  def fibers? = TestKafka::MODE == :thread

  def read_all(topic, partitions) = Array.new(partitions) { |p| TestCluster.read_messages(topic, p, isolation: "read_uncommitted") }.flatten

  # The letters whose headers do not name their message's place, group, attempts and error.
  def misnamed(letters, places, group)
    letters.reject do |letter|
      headers = letter.headers
      headers.values_at("source_topic", "source_consumer_group", "source_attempts", "error_class") == [@topic, group, "3", "Failing::Permanent"] &&
        places[letter.payload] == [Integer(headers["source_partition"]), Integer(headers["source_offset"])]
    end
  end

  it "leaves every input processed or dead-lettered with its origin while a member and a node are SIGKILLed (1% permanent, 5% transient)", :polling do
    tag = "#{@tag}-#{TestKafka::MODE}"
    group = "sluice-failure-faults-#{tag}"
    inputs = Array.new(messages) { |i| "#{tag}:k#{i % keys}:#{i / keys}" }
    reports = produce_acknowledged(messages) { |i| { topic: @topic, key: "k#{i % keys}", payload: inputs[i] } }
    places = inputs.zip(reports).to_h { |payload, report| [payload, [report.partition, report.offset]] }
    started = now
    kinds = inputs.to_h { |payload| [payload, Failing.kind(payload)] }
    permanent = inputs.select { |payload| kinds[payload] == :permanent }
    env = { "KAFKA_BROKERS" => TestCluster::BROKERS, "SLUICE_POLLING_MODE" => TestKafka::MODE.to_s, "GROUP" => group, "INPUT" => @topic,
            "CONCURRENCY" => "64", "ORDERING" => "key", "WORK_SECONDS" => "0.1", "ASSIGNMENT" => "cooperative-sticky",
            "DEAD_LETTER" => @dlq, "FIBERS" => fibers? ? "1" : "0" }
    runs = FailureFaultRuns.new(env)
    members = Array.new(3) { runs.start }
    processed = ->(fraction) { runs.ok_distinct >= ((messages - permanent.size) * fraction).to_i }

    runs.await("20% processed", 90) { processed[0.2] }
    marks = { "20%" => now - started }
    killed = members[0]
    killed.kill
    members[0] = runs.start # a member left without a word, another joins
    runs.await("45% processed", 90) { processed[0.45] }
    node = TestCluster.leaders(@topic).values.reject(&:negative?).tally.max_by(&:last).first
    marks["node down"] = now - started
    TestCluster.kill(node, [@topic, @dlq])
    marks["fenced"] = now - started
    runs.await("70% processed", 90) { processed[0.7] }
    marks["70%"] = now - started
    restart = Thread.new { TestCluster.restart(node) } # a JVM's start: the members go on meanwhile
    runs.await("every input processed or dead-lettered", 120) { processed[1] && runs.dead_distinct >= permanent.size }
    took = now - started
    statuses = members.map(&:finish)
    restart.value
    marks["restarted"] = now - started

    ok = runs.ok_tally
    letters = read_all(@dlq, partitions)
    dead = letters.map(&:payload).tally
    lost = inputs.reject { |payload| ok.key?(payload) || dead.key?(payload) }
    both = ok.keys & dead.keys
    puts format("failure policies under faults (%<mode>s, %<workers>s): %<messages>d messages, %<permanent>d permanent, %<transient>d transient; " \
                "processed OK %<ok>d (%<ok_dup>d more than once), dead letters %<letters>d of %<dead>d messages (%<dead_dup>d more than once), " \
                "in both %<both>d, lost %<lost>d; a member SIGKILLed, node %<node>d SIGKILLed and restarted; " \
                "every input done at %<took>.0f s (%<marks>s)",
                mode: TestKafka::MODE, workers: fibers? ? "fibers" : "threads", messages: messages, permanent: permanent.size,
                transient: kinds.count { |_, kind| kind == :transient }, ok: ok.size, ok_dup: ok.count { |_, times| times > 1 },
                letters: letters.size, dead: dead.size, dead_dup: dead.count { |_, times| times > 1 }, both: both.size, lost: lost.size,
                node: node, took: took, marks: marks.map { |what, at| format("%s %.0f s", what, at) }.join(", "))
    expect(lost).to be_empty
    expect(dead.keys).to match_array(permanent) # every permanent failure, and nothing else
    expect(misnamed(letters, places, group)).to be_empty
    expect(both - runs.ok_by([killed]).to_a).to be_empty # only a crash could put a message in both
    failed = members.zip(statuses).reject { |_, status| status.success? }
    expect(failed.map { |member, status| "#{status}: #{member.stderr_output.lines.grep(/\(Sluice::|\(Failing::/).first(2).join}" }).to be_empty
  ensure
    runs&.kill_all
    restart&.join
  end
end
