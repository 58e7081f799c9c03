# frozen_string_literal: true

# A scenario of spec/integration/consumer/own_process_spec.rb, in a process of its own.
require_relative "../../setup"
require_relative "helpers"

consumer = make_consumer
closed = record(consumer, "consumer.closed", "consumer.partitions_assigned")
trap("TERM") { consumer.close }
consumer.subscribe("sluice-spec-idle")
Thread.new do
  sleep 0.05 until closed["consumer.partitions_assigned"].any?
  Process.kill("TERM", Process.pid)
end
consumer.each_message { nil }
wait_for(10, "the close") { consumer.closed? }
result("closed" => consumer.closed?, "closed_events" => closed["consumer.closed"].size)
