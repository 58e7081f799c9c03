# frozen_string_literal: true

require "securerandom"
require "set"

# Issue 55, item 1: what read partitions again from far back, once from
# offset 0, in the parallel fault runs. The position logs of 8 runs
# (spec/support/scenarios/positions.rb) showed it every time the node
# SIGKILLed was the group's coordinator, and never otherwise: clients reach
# no coordinator until the cluster fenced the node (broker.session.timeout.ms,
# 6 s) and another loaded the group, every commit meanwhile fails ("Waiting
# for coordinator"), and once session.timeout.ms (6 s) passed without an
# answer, librdkafka ends each member's session itself: the assignment is
# lost, revoked without a commit (the coordinator refuses a member it no
# longer knows: unknown_member_id), and the next owners read again what was
# processed since the coordinator went away; from offset 0 (or, with
# auto.offset.reset: latest, from the end) where nothing was committed yet.
#
# Here the clients are cut off the coordinator (its proxy disabled) for
# longer than session.timeout.ms: the member's assignment is lost every
# time, and sluice says so with consumer.offsets_left_behind (lost: true),
# naming the partitions whose processed offsets were left uncommitted.
RSpec.describe "A consumer cut off its group coordinator for longer than its session", :cluster, timeout: 120 do
  count = 3_000

  include ClusterScenario

  def await(what, seconds)
    deadline = now + seconds
    sleep(0.05) until yield || now > deadline
    raise "#{what}: not within #{seconds}s" unless yield
  end

  it "loses its assignment without a commit and names the partitions left behind (consumer.offsets_left_behind, lost: true)", :polling do
    topic = TestCluster.create_topics(["sluice-coordinator-loss-#{SecureRandom.hex(4)}"], 3).first
    producer = build_producer(kafka: { "bootstrap.servers": TestCluster::DIRECT })
    count.times { |i| producer.produce_async(topic: topic, partition: i % 3, payload: "m#{i}") }
    producer.flush
    group = "sluice-coordinator-loss-#{SecureRandom.hex(4)}"
    consumer = build_consumer("bootstrap.servers": TestCluster::BROKERS, "group.id": group, "auto.offset.reset": "earliest",
                              "session.timeout.ms": 6_000, "heartbeat.interval.ms": 500, "auto.commit.interval.ms": 500)
    left = Queue.new
    consumer.monitor.subscribe("consumer.offsets_left_behind") { |event| left << event.payload }
    lock = Mutex.new
    payloads = []
    distinct = Set.new
    consumer.subscribe(topic)
    reader = Thread.new do
      consumer.each_message do |message|
        lock.synchronize { distinct << payloads.push(message.payload).last }
        sleep(0.005) # some work: the read goes on while the coordinator is away
      end
    end
    await("300 messages read", 30) { lock.synchronize { payloads.size } >= 300 }
    coordinator = TestCluster.coordinator(group, "__consumer_offsets")
    cut_at = lock.synchronize { payloads.size }
    Toxiproxy.disable(coordinator)
    begin
      await("consumer.offsets_left_behind", 30) { !left.empty? }
    ensure
      Toxiproxy.enable(coordinator)
    end
    event = left.pop
    await("every message read", 60) { lock.synchronize { distinct.size } >= count }
    consumer.stop
    reader.join(30)
    puts format("coordinator loss (%<mode>s): node %<node>d cut off after %<cut>d messages; lost: %<lost>s, left behind %<left>s; " \
                "%<read>d read, %<again>d of them again", mode: TestKafka::MODE, node: coordinator, cut: cut_at, lost: event[:lost],
                                                          left: event[:partitions].inspect, read: payloads.size, again: payloads.size - distinct.size)
    expect(event[:lost]).to be(true)
    expect(event[:partitions].keys).to eq([topic])
    expect(event[:partitions][topic].keys).not_to be_empty
  ensure
    Toxiproxy.reset
    consumer&.close
  end
end
