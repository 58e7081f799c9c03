# frozen_string_literal: true

require "securerandom"
require "set"

# A partition assigned at a logical offset asks its leader where that is
# (ListOffsets). Assigned again before the answer comes, the answer is
# outdated: librdkafka as released dropped it, and then set the partition,
# already fetching from its new position, back to querying, and 500 ms later
# moved it to the old query's offset (END here): the rest of the partition
# was skipped, silently. The bundled librdkafka's patch 0011 drops such an
# answer only. Here: assign at END with 300 ms of latency on the leader's
# link, at once again at BEGINNING, then every offset must be read.
unpatched = ENV["SLUICE_USE_SYSTEM_LIBRDKAFKA"] == "1" && "the system's librdkafka lacks patch 0011"
RSpec.describe "A consumer's outdated offset answer", :cluster, timeout: 120, skip: unpatched do
  count = 20_000

  include ClusterScenario

  it "does not move a partition that already fetches from its new position" do
    topic = TestCluster.create_topic("sluice-outdated-offset-#{SecureRandom.hex(4)}", 1)
    producer = build_producer(kafka: { "bootstrap.servers": TestCluster::DIRECT })
    count.times { |i| producer.produce_async(topic: topic, partition: 0, payload: "m#{i}" * 20) }
    producer.flush
    consumer = build_consumer("bootstrap.servers": TestCluster::BROKERS, "enable.auto.commit": false, "auto.offset.reset": "earliest",
                              "max.partition.fetch.bytes": 100_000)
    consumer.assign(topic => { 0 => 0 })
    expect(consumer.poll(10_000)).not_to be_nil # librdkafka learnt the log start offset: BEGINNING needs no query below
    Toxiproxy.add(TestCluster.leader(topic, 0), :latency, streams: %w[downstream], latency: 300)
    consumer.assign(topic => { 0 => -1 }) # END: a ListOffsets, answered 300 ms later
    consumer.assign(topic => { 0 => -2 }) # BEGINNING, at once: that answer comes back outdated
    seen = Set.new
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 60
    while seen.size < count && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      message = consumer.poll(200)
      seen << message.offset if message
    end
    puts format("outdated offset answer (%<mode>s): %<seen>d of %<count>d offsets read after the second assign (the last: %<last>s)",
                mode: TestKafka::MODE, seen: seen.size, count: count, last: seen.max.inspect)
    expect(seen.size).to eq(count), "offsets #{(0...count).find { |offset| !seen.include?(offset) }}.. were skipped"
  ensure
    Toxiproxy.reset
  end
end
