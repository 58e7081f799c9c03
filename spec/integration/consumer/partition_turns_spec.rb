# frozen_string_literal: true

# Under a concurrent read each partition assigned is read from a queue of its
# own, taken in turns (ext/sluice/partition_queues.c), not in the order
# librdkafka's fetch answers arrived: there a whole answer of one partition (thousands of small messages)
# came before the next partition's first. Under parallel consumption a
# partition's first messages waited seconds behind the others' (issue 55,
# item 1: with its coordinator killed meanwhile, a member handed such a
# partition on uncommitted, to be read again from offset 0).
#
# Plain reads (each_message, each_batch, poll) keep the one consumer queue:
# with a partition's own queue, librdkafka's prefetch limits are split among
# the partitions (patch 0015), which halves a plain read's rate.
RSpec.describe "Partitions taken in turn", :kafka,
               skip: (!Sluice::Native::Consumer.own_partition_queues? &&
                      "a system librdkafka (no patch 0015): every partition is read from the consumer queue") do
  let(:topic) { "sluice-spec-turns" }
  let(:partitions) { 4 }
  let(:per_partition) { 2_000 }
  let(:producer) { build_producer }

  # Produces per_partition small messages to each partition; returns each partition's first offset.
  def fill
    tag = rand(1 << 30)
    reports = (0...partitions).map do |partition|
      producer.produce_many_async(Array.new(per_partition) { |i| { topic: topic, partition: partition, payload: "#{tag}-#{i}", key: "k#{i}" } })
    end
    reports.to_h { |handles| handles.map(&:wait).first.then { |first| [first.partition, first.offset] } }
  end

  # Until librdkafka has fetched count messages (its statistics' rxmsgs), received on fetched.
  def wait_fetched(fetched, count)
    deadline = monotonic + 30
    seen = 0
    seen = pop_within(fetched, 30) while seen < count && monotonic < deadline
    raise "librdkafka fetched #{seen} of #{count} messages within 30 s" if seen < count
  end

  def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  it "starts every partition's first message among the first blocks of a concurrent read" do
    starts = fill
    consumer = build_consumer("statistics.interval.ms": 50, "enable.auto.commit": false)
    fetched = Queue.new
    consumer.monitor.subscribe("statistics.emitted") { |event| fetched << event[:statistics]["rxmsgs"].to_i }
    gate = Queue.new # closed until librdkafka holds every message; each block passes the token on
    started = Queue.new
    reader = Thread.new do
      consumer.each_message(concurrency: 8, ordering: :key) do |message|
        gate << gate.pop
        started << message
        consumer.stop if started.size >= 400
      end
    end
    consumer.assign(topic => starts) # carried out by the reader: the partitions get their own queues as assigned
    wait_fetched(fetched, partitions * per_partition)
    gate << :open
    expect(reader.join(30)).to be(reader)
    order = Array.new(started.size) { started.pop }
    firsts = order.each_index.select { |i| order[i].offset == starts.fetch(order[i].partition) }
    expect(order.map(&:partition).uniq).to contain_exactly(*0...partitions)
    expect(firsts.size).to eq(partitions)
    expect(firsts.max).to be < partitions * 64 # a round of turns (at most 64 each) after the workers' buffer; before, behind 3 x 2,000
  end

  # Patch 0015 (the bundled librdkafka): a partition read from its own queue counts against its share of the
  # prefetch limits, not all of them. Without it, each of the 4 prefetched up to queued.min.messages (all its
  # 2,000: 8,000 fetched); with it, a quarter each plus one fetch answer (max.partition.fetch.bytes: 4 KB,
  # batches of 20), about 2,700. The concurrent read's two blocks wait: what librdkafka holds is prefetch.
  it "keeps the prefetch of partitions read from their own queues within the consumer's limits" do
    limit = 2_000
    batches = build_producer(kafka: { "batch.num.messages": 20, "linger.ms": 0 })
    starts = (0...partitions).to_h do |partition|
      handles = batches.produce_many_async(Array.new(per_partition) { |i| { topic: topic, partition: partition, payload: "q#{i}" } })
      [partition, handles.map(&:wait).first.offset]
    end
    consumer = build_consumer("statistics.interval.ms": 50, "enable.auto.commit": false, "queued.min.messages": limit,
                              "max.partition.fetch.bytes": 4096)
    fetched = Queue.new # what librdkafka fetched: its queues, and the few (at most 82) the read took from them
    consumer.monitor.subscribe("statistics.emitted") { |event| fetched << event[:statistics]["rxmsgs"].to_i }
    consumer.assign(topic => starts)
    release = Queue.new
    reader = Thread.new { consumer.each_message(concurrency: 2) { release.pop } } # two blocks held: nothing is taken after
    deadline = monotonic + 3 # fetching stops within a few answers; 3 s of statistics are 60 looks
    highest = 0
    highest = [highest, pop_within(fetched, 10)].max while monotonic < deadline
    consumer.stop
    2.times { release << true }
    expect(reader.join(10)).to be(reader)
    expect(highest).to be_between(limit / 2, 2 * limit)
  end

  # A partition whose messages come after a concurrent read drained another's: it waits behind one small
  # drain (Inbox::TURN_DRAIN_ITEMS) and the workers' buffer (max_buffered), not behind 2,000.
  it "starts a partition's message produced while a concurrent read works through another's" do
    start = producer.produce_many_async(Array.new(per_partition) { |i| { topic: topic, partition: 0, payload: "p0-#{i}", key: "k#{i}" } })
                    .map(&:wait).first.offset
    after_mark = producer.produce_sync(topic: topic, partition: 1, payload: "mark").offset + 1 # partition 1 is read from here
    consumer = build_consumer("enable.auto.commit": false)
    consumer.assign(topic => { 0 => start, 1 => after_mark })
    started = Queue.new
    late = nil
    consumer.each_message(concurrency: 8, ordering: :key) do |message|
      started << message.partition
      late ||= producer.produce_sync(topic: topic, partition: 1, payload: "late", key: "late") if message.offset == start
      next consumer.stop if message.partition == 1

      sleep(0.01) # a block's work: the read is still in partition 0 when the late message comes
    end
    order = Array.new(started.size) { started.pop }
    expect(order.index(1)).to be < 64 + 64 + 2 * 64 # max_buffered (8 x 8), a drain, slack for the fetch; before, about 2,000
  end
end
