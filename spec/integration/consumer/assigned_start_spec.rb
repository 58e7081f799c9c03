# frozen_string_literal: true

# A partition the group never committed is committed at its start as soon as
# its first message is drained (Consumer::Ledger#starts!), not once a message
# finished there: a member that takes it over while that first message is
# still unfinished starts there, not at auto.offset.reset (latest: skipping
# everything before it; earliest: reading the log again from its
# beginning). Issue 55, item 1: under ordering: :key a newly assigned
# partition's first message waited 9 s behind other partitions' messages.
# Each first member starts at latest, so what it reads first is a message of
# its example's, with the topic's older messages below it.
RSpec.describe "A newly assigned partition's start", :kafka do
  let(:topic) { "sluice-spec-starts" }
  let(:group) { "sluice-spec-starts-#{rand(1 << 30)}" }
  let(:producer) { build_producer }
  # Payloads of this example's own.
  let(:tag) { "starts-#{rand(1 << 30)}" }

  def member(reset) = build_consumer(group_id: group, "auto.offset.reset": reset)

  # Produces payloads, each with a key of its own (:key runs them side by side); returns their offsets.
  def produce(*payloads) = payloads.map { |payload| producer.produce_sync(topic: topic, partition: 0, payload: payload, key: payload).offset }

  def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # Produces a message at a time until the first member reads one (it starts
  # at latest once assigned: the wait is for its assignment); returns what it read.
  def first_read(&)
    deadline = monotonic + 30
    until (read = yield(produce("#{tag}-probe").first))
      raise "the first member read nothing within 30 s" if monotonic > deadline
    end
    read
  end

  # The group's committed offset once it is offset (commits are asynchronous), or the last one seen after 10 s.
  def committed_soon(offset)
    probe = build_consumer(group_id: group)
    probe.assign(topic => [0])
    deadline = monotonic + 10
    seen = probe.committed.dig(topic, 0) until seen == offset || monotonic > deadline
    seen
  ensure
    probe&.close
  end

  # The offsets a member subscribed with reset reads up to a sentinel produced once it is assigned, and the sentinel's.
  def next_member_reads(reset, concurrency:)
    consumer = member(reset)
    consumer.subscribe(topic)
    assigned = Queue.new
    consumer.monitor.subscribe("consumer.partitions_assigned") { assigned << true }
    seen = Queue.new
    sentinel = "#{tag}-sentinel"
    reading = Thread.new do
      consumer.each_message(concurrency: concurrency) do |message|
        seen << message.offset
        consumer.stop if message.payload == sentinel
      end
    end
    pop_within(assigned, 30)
    offset = produce(sentinel).first
    reading.join(30) or raise "the next member did not read the sentinel within 30 s"
    [Array.new(seen.size) { seen.pop }.sort, offset]
  ensure
    consumer&.close
  end

  it "is committed while a concurrent read's first block runs: a member taking over at latest skips nothing" do
    consumer = member("latest")
    consumer.subscribe(topic)
    held = Queue.new
    release = Queue.new
    finished = Queue.new
    first = Mutex.new
    claimed = false
    reading = Thread.new do
      consumer.each_message(concurrency: 4, ordering: :key, finish_within: 100) do |message|
        next (held << message.offset) && release.pop if first.synchronize { !claimed && (claimed = true) }

        finished << message.offset
      end
    end
    start = first_read { pop_within(held, 1) rescue nil } # rubocop:disable Style/RescueModifier -- not read yet: produce again
    last = produce("#{tag}-a", "#{tag}-b", "#{tag}-c").last
    Array.new(last - start) { pop_within(finished) } # every message above the held one finished

    expect(committed_soon(start)).to eq(start)
    consumer.stop # the held block outlives finish_within: its offset is not stored
    reading.join(30) or raise "each_message did not return"
    consumer.close
    release << true

    seen, sentinel = next_member_reads("latest", concurrency: 4)
    # What finished above the held message is skipped (in the commit's metadata) where librdkafka keeps it.
    expect(seen).to eq(Sluice::Consumer::Inbox.finished_metadata? ? [start, sentinel] : (start..sentinel).to_a)
  end

  it "is committed while poll's first message is unfinished: a member taking over at earliest reads nothing before it" do
    produce("#{tag}-before") # below the first member's start
    consumer = member("latest")
    consumer.subscribe(topic)
    start = first_read { consumer.poll(1_000, store: true)&.offset }

    expect(committed_soon(start)).to eq(start)
    consumer.close # the message poll returned was not finished: not stored

    seen, sentinel = next_member_reads("earliest", concurrency: 1)
    expect(seen).to eq((start..sentinel).to_a)
  end
end
