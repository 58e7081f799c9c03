# frozen_string_literal: true

# Share groups (issue 57): records per second through 1, 2 and 4 share consumers on ONE partition, each
# record handled for 10 ms, beside a consumer group's one member on the same partition (a consumer
# group cannot give one partition to more than one member: its ceiling is 1 / handler time).
#
#   KAFKA_BROKERS=127.0.0.1:9392 ruby bench/share_consumer.rb [--records 400] [--handler-ms 10]
#
# Needs librdkafka 2.15.0 (SLUICE_LIBRDKAFKA_VERSION=2.15.0 rake compile) and Kafka 4.2+ with share
# groups (bin/test-kafka4's broker: KAFKA_VERSION=4.4.0 KAFKA_PORT=9392 ... bin/kafka start). Time runs
# from the first record handled to the last; the members joined before the records were written.

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "sluice"
require "optparse"
require "securerandom"

options = { records: 400, handler_ms: 10 }
OptionParser.new do |parser|
  parser.on("--records N", Integer) { |n| options[:records] = n }
  parser.on("--handler-ms N", Integer) { |n| options[:handler_ms] = n }
end.parse!
BROKERS = ENV.fetch("KAFKA_BROKERS", "127.0.0.1:9392")
RECORDS = options[:records]
HANDLER = options[:handler_ms] / 1000.0

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

admin = Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": BROKERS } }
producer = Sluice::Producer.new { |config| config.kafka = { "bootstrap.servers": BROKERS } }

# One record per produce request: Kafka 4.4's share fetch acquires whole record batches (a
# producer's batch goes to one member), so records written in one batch are not shared.
fill = ->(topic) { RECORDS.times { |i| producer.produce_sync(topic: topic, payload: "record-#{i}", partition: 0) } }

# A reader's block: the handler's time, then the moment it finished.
handle = ->(seen) { sleep(HANDLER) && seen << now }

# Runs the readers (threads) until RECORDS were handled, then stop; returns records per second.
measure = lambda do |readers, stop|
  seen = Queue.new
  threads = readers.map { |read| Thread.new { read.call(seen) } }
  times = Array.new(RECORDS) { seen.pop }
  stop.call
  threads.each(&:join)
  RECORDS / (times.max - times.min)
end

[1, 2, 4].each do |members|
  topic = "sluice-bench-share-#{SecureRandom.hex(4)}"
  group = "sluice-bench-share-#{SecureRandom.hex(4)}"
  admin.create_topic(topic, partitions: 1)
  admin.alter_configs(group: group, set: { "share.auto.offset.reset" => "earliest" })
  consumers = Array.new(members) do
    Sluice::ShareConsumer.new { |config| config.kafka = { "bootstrap.servers": BROKERS, "group.id": group, "max.poll.records": 10 } }
  end
  consumers.each do |consumer|
    consumer.subscribe(topic)
    consumer.poll(0)
  end
  fill.call(topic)
  readers = consumers.map do |consumer|
    ->(seen) { consumer.each_message { handle.call(seen) } }
  end
  rate = measure.call(readers, -> { consumers.each(&:stop) })
  consumers.each(&:close)
  admin.delete_topic(topic)
  puts format("share group, %d member(s), 1 partition, %d ms handler: %6.1f records/s", members, options[:handler_ms], rate)
end

topic = "sluice-bench-share-#{SecureRandom.hex(4)}"
admin.create_topic(topic, partitions: 1)
fill.call(topic)
consumer = Sluice::Consumer.new do |config|
  config.kafka = { "bootstrap.servers": BROKERS, "group.id": "sluice-bench-cg-#{SecureRandom.hex(4)}", "auto.offset.reset": "earliest" }
end
consumer.subscribe(topic)
rate = measure.call([->(seen) { consumer.each_message { handle.call(seen) } }], -> { consumer.stop })
consumer.close
admin.delete_topic(topic)
puts format("consumer group, 1 member, 1 partition, %d ms handler: %6.1f records/s", options[:handler_ms], rate)
producer.close
admin.close
