# frozen_string_literal: true

# A scenario of spec/integration/lifecycle/exit_without_close_spec.rb, in a process of its own.
#
# linger.ms: the messages are certainly still queued when the script ends. ARGV[0]: the run, in every payload.
require_relative "../../setup"

run = ARGV.fetch(0)
producer = make_producer(kafka: { "linger.ms": 500 })
producer.monitor.subscribe("error.occurred") { |e| puts("ERROR-EVENT #{e[:type]}") }
4.times { |i| producer.produce_async(topic: "sluice-spec-1p", payload: "exit-spec #{run} #{i}") }
2.times { |i| producer.buffer(topic: "sluice-spec-1p", payload: "exit-spec #{run} #{i + 4}") } # never flushed
puts("PRODUCED")
