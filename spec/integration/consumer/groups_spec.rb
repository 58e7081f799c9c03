# frozen_string_literal: true

require "securerandom"

# Members join and leave a consumer group while messages keep coming: two
# members split the six partitions of sluice-spec-cgroup, a third one joins,
# then the first one closes. Each member reads in a thread of its own (one with
# each_batch, the others with each_message) and checks every message as it is
# handed out against its assignment as the rebalance events changed it (see
# ConsumerGroups::Member). Every message produced must be handed out at least
# once. Once with each eager assignor, once with cooperative-sticky.
#
# Each example prints its figures on one line starting with "consumer groups".
RSpec.describe "Consumer groups: members joining and leaving", :kafka, timeout: 90 do
  include ConsumerGroups

  let(:topic) { "sluice-spec-cgroup" }
  let(:partitions) { partition_count(topic) }
  # Messages every member must have handed out in each phase before the next one starts.
  let(:progress) { 200 }
  let(:board) { ConsumerGroups::Board.new }
  let(:tag) { SecureRandom.hex(4) }
  let(:members) { [] }

  after do
    @feeding = false
    @feeder&.join
    members.each { |member| member.consumer.close }
  end

  # Produces to every partition until the example stops it, a burst every
  # 10 ms (a steady flow: rebalances happen with messages in flight).
  def start_feeding(producer)
    @feeding = true
    @produced = 0
    @feeder = Thread.new do
      while @feeding
        30.times { producer.produce_async(topic: topic, partition: @produced % partitions, payload: "#{tag}:#{@produced += 1}") }
        sleep(0.01)
      end
      producer.flush
    end
  end

  def stop_feeding
    @feeding = false
    @feeder.value
    @produced
  end

  def join_group(name, group, strategy, batch: false, pace: nil, kafka: {})
    consumer = group_consumer(group, kafka: { "partition.assignment.strategy": strategy }.merge(kafka))
    member = ConsumerGroups::Member.new(name, consumer, topic, board, batch: batch, pace: pace)
    members << member
    member.start
  end

  # Every partition owned by exactly one of these members, each of them
  # owning some, and each of them has handed out `progress` messages since.
  def await_split(live, what)
    board.await("#{what}: the six partitions split among #{live.map(&:name).join(", ")}") do
      owned = live.map { |member| member.owned.to_a }
      owned.none?(&:empty?) && owned.flatten.sort == Array.new(partitions) { |p| p }
    end
    counts = board.read { live.to_h { |member| [member, member.count] } }
    board.await("#{what}: #{progress} messages handed out to each member") do
      live.all? { |member| member.count >= counts[member] + progress }
    end
  end

  def seqs_handed_out
    board.read { members.flat_map { |member| member.handed_out.map(&:last) } }
  end

  def run_scenario(strategy)
    group = "sluice-spec-cgroup-#{strategy}-#{tag}"
    start_group_at_end(group, topic)
    start_feeding(build_producer)
    first = join_group("first", group, strategy)
    second = join_group("second", group, strategy, batch: true)
    await_split([first, second], "two members")
    third = join_group("third", group, strategy)
    await_split([first, second, third], "a third member joined")
    first.consumer.close # from another thread than its reader's: each_message returns, then it leaves
    first.join
    await_split([second, third], "the first member left")
    produced = stop_feeding
    expected = (1..produced).map { |seq| "#{tag}:#{seq}" }
    board.await("every message handed out") { board.seen.size >= expected.size && expected.all? { |p| board.seen.include?(p) } }
    [second, third].each { |member| member.consumer.stop }
    [second, third].each(&:join)
    report(strategy, produced)
  end

  def report(strategy, produced)
    seqs = seqs_handed_out.select { |payload| payload.start_with?("#{tag}:") }
    figures = { produced: produced, handed_out: seqs.size, duplicates: seqs.size - seqs.uniq.size,
                violations: members.sum { |m| m.violations.size }, errors: members.flat_map(&:errors).tally }
    rebalances = members.to_h { |m| [m.name, m.timeline.map { |kind, parts| "#{kind == :assigned ? "+" : "-"}#{parts.join(",")}" }] }
    puts "consumer groups (#{TestKafka::MODE}, #{strategy}): #{figures.map { |k, v| "#{k} #{v}" }.join(", ")}; " \
         "assignment timelines #{rebalances}"
    figures
  end

  shared_examples "a group that rebalances" do |strategy, protocol|
    it "hands every message out at least once, and none of a partition after its revoke (#{strategy})" do
      figures = run_scenario(strategy)

      expect(members.flat_map(&:violations)).to eq([])
      expect(figures[:handed_out]).to be >= figures[:produced]
      first = members.first
      expect(first.owned).to be_empty # close gave everything up
      expect(first.timeline.last.first).to eq(:revoked)
      # KIP-848's protocol (SLUICE_GROUP_PROTOCOL=consumer) is incremental whatever the assignor.
      if protocol == :eager && !GroupProtocol.consumer? # every rebalance takes the whole assignment away first
        expect(members.select(&:revoked_everything?).map(&:name)).to include("first", "second")
      else # members that stay keep partitions through every rebalance
        expect(members.drop(1).select(&:revoked_everything?).map(&:name)).to eq([])
      end
    end
  end

  include_examples "a group that rebalances", "range", :eager
  include_examples "a group that rebalances", "roundrobin", :eager
  include_examples "a group that rebalances", "cooperative-sticky", :cooperative

  # each_message hands out what one drain buffered; while a slow member works
  # through it, Inbox#keep_polling polls the queue every second, and a
  # rebalance found there is answered at once: what is buffered for the
  # partitions given up is dropped, not handed out (the new owner reads it).
  it "answers a rebalance that comes while a slow member works through what it buffered (cooperative-sticky)" do
    group = "sluice-spec-cgroup-window-#{tag}"
    start_group_at_end(group, topic)
    producer = build_producer
    backlog = 1_200
    backlog.times { |i| producer.produce_async(topic: topic, partition: i % partitions, payload: "#{tag}:#{i + 1}") }
    producer.flush
    # 10 ms a message: 12 s for the backlog alone; max.poll.interval.ms 6 s
    first = join_group("first", group, "cooperative-sticky", pace: 0.01, kafka: { "max.poll.interval.ms": 6_000 })
    board.await("the first member owns every partition and has begun the backlog") { first.owned.size == partitions && first.count >= 100 }
    second = join_group("second", group, "cooperative-sticky")
    expected = (1..backlog).map { |seq| "#{tag}:#{seq}" }
    board.await("every message handed out", 60) { expected.all? { |payload| board.seen.include?(payload) } }
    members.each { |member| member.consumer.stop }
    members.each(&:join)

    _, given_up, _, handed_out_by_then = first.timeline.find { |kind, parts| kind == :revoked && parts.any? }
    first_seqs = tagged_payloads(first)
    figures = report("cooperative-sticky, slow member rebalanced", backlog)
    puts "  first handed out #{first_seqs.size} (#{handed_out_by_then} when it gave up #{given_up}), second #{tagged_payloads(second).size}"

    expect(members.flat_map(&:violations)).to eq([])
    expect(given_up).not_to be_empty
    expect(handed_out_by_then).to be < backlog # the revoke came while the backlog was being worked through
    expect(first_seqs.size).to be < backlog # some of it went to the new owner instead
    expect(second.owned.to_a).to match_array(given_up)
    expect(figures[:duplicates]).to eq(0) # the first member committed what it had processed before giving up
  end

  def tagged_payloads(member) = board.read { member.handed_out.map(&:last).select { |payload| payload.start_with?("#{tag}:") } }

  # librdkafka counts only polls of the consumer queue for max.poll.interval.ms
  # and commits only stored offsets, while each_message hands out what one
  # drain of that queue buffered (up to Inbox::DRAIN_ITEMS messages).
  it "keeps a slow member in its group and commits its progress while it works through a backlog" do
    group = "sluice-spec-cgroup-slow-#{tag}"
    start = start_group_at_end(group, topic)
    producer = build_producer
    backlog = 1_200
    backlog.times { |i| producer.produce_async(topic: topic, partition: i % partitions, payload: "#{tag}:#{i + 1}") }
    producer.flush
    # 10 ms a message: 12 s for the backlog, twice max.poll.interval.ms
    consumer = group_consumer(group, kafka: { "max.poll.interval.ms": 6_000, "auto.commit.interval.ms": 1_000 })
    errors = []
    consumer.monitor.subscribe("error.occurred") { |event| errors << "#{event[:type]}: #{event[:error]}" }
    revokes = []
    consumer.monitor.subscribe("consumer.partitions_revoked") { |event| revokes << event[:partitions] }
    committed_midway = nil
    seen = []
    consumer.subscribe(topic)
    with_outsider(group, topic) do |checker|
      consumer.each_message do |message|
        seen << message.payload
        sleep(0.01)
        committed_midway ||= checker.committed.fetch(topic) if seen.size == backlog - 300 # 3 s before the end
        consumer.stop if seen.size >= backlog
      end
    end
    consumer.close
    progress = committed_midway.sum { |partition, offset| offset - start.fetch(partition) }
    puts "consumer groups (#{TestKafka::MODE}, slow member): #{seen.size} messages at 10 ms each, " \
         "committed #{progress} of the first #{backlog - 300} by then, errors #{errors}, revoked before close #{revokes.size - 1}"

    expect(errors).to eq([])
    expect(revokes.size).to eq(1) # at close
    expect(seen.uniq.size).to eq(backlog)
    expect(progress).to be >= backlog - 300 - 300 # stored within 1 s, committed within 1 s more: 100 messages a second
  ensure
    consumer&.close
  end
end
