# frozen_string_literal: true

# A scenario of spec/integration/consumer/own_process_spec.rb, in a process of its own.
#
# A block that really runs longer than max.poll.interval.ms: reported, partitions given up.
require_relative "../../setup"
require_relative "helpers"

producer = make_producer
report = producer.produce_sync(topic: "sluice-spec-slow", payload: "slow")
consumer = make_consumer(**GROUP_TIMERS)
events = record(consumer, "consumer.partitions_assigned", "consumer.partitions_revoked", "error.occurred")
consumer.monitor.subscribe("consumer.partitions_revoked") { consumer.stop } # after the report, with the next reads
Thread.new do
  sleep 40
  consumer.stop
end
consumer.subscribe("sluice-spec-slow")
blocked = nil
consumer.each_message do |message|
  next if message.offset < report.offset || blocked

  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  sleep 13 # the application stuck in its block beyond max.poll.interval.ms
  blocked = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
end
result(
  "blocked_s" => blocked,
  "errors" => events["error.occurred"].map { |e| e[:error].respond_to?(:code) ? e[:error].code.to_s : e[:error].to_s },
  "revoked" => events["consumer.partitions_revoked"].map { |e| e[:partitions] }
)
consumer.close
producer.close
