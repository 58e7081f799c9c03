# frozen_string_literal: true

# How long Sluice::Admin calls take against a broker, and how many Ruby
# threads an Admin adds beside a producer and a consumer.
#
#   ruby -Ilib bench/admin.rb [fd|thread] [brokers]
#
# Prints one line per call: milliseconds per call (mean of n).
require_relative "../lib/sluice"

mode = (ARGV[0] || "fd").to_sym
brokers = ARGV[1] || ENV.fetch("KAFKA_BROKERS", "127.0.0.1:9092")
build = lambda do |klass, extra = {}|
  klass.new do |config|
    config.kafka = { "bootstrap.servers": brokers }.merge(extra)
    config.polling.mode = mode
    config.logger = Logger.new(nil)
  end
end
measure = lambda do |name, count = 20, &call|
  started = Sluice::Shared::Clock.now
  count.times(&call)
  printf("%-18s %8.2f ms/call (n=%d)\n", name, (Sluice::Shared::Clock.now - started) * 1000 / count, count)
end

producer = build.call(Sluice::Producer)
consumer = build.call(Sluice::Consumer, "group.id": "sluice-bench-admin-#{rand(1 << 30)}")
threads = Thread.list.size
admin = build.call(Sluice::Admin)
admin.topics
puts "mode=#{mode} librdkafka=#{Sluice.librdkafka_version} ruby_threads_added_by_admin=#{Thread.list.size - threads}"

topic = "sluice-bench-admin-#{rand(1 << 30)}"
group = "#{topic}-group"
measure.call("create_topic", 1) { admin.create_topic(topic, partitions: 3) }
producer.produce_sync(topic: topic, partition: 0, payload: "x")
measure.call("topics") { admin.topics }
measure.call("describe_topic") { admin.describe_topic(topic) }
measure.call("describe_configs") { admin.describe_configs(topic: topic) }
measure.call("alter_configs", 5) { admin.alter_configs(topic: topic, set: { "retention.ms" => "60000" }) }
measure.call("watermark_offsets") { admin.watermark_offsets(topic, 0) }
measure.call("groups") { admin.groups }
measure.call("reset_offsets", 5) { admin.reset_offsets(group, topic, :earliest) }
measure.call("lag") { admin.lag(group) }
measure.call("cluster") { admin.cluster }
admin.delete_group(group)
measure.call("delete_topic", 1) { admin.delete_topic(topic) }
[admin, consumer, producer].each(&:close)
