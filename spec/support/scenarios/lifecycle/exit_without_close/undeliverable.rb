# frozen_string_literal: true

# A scenario of spec/integration/lifecycle/exit_without_close_spec.rb, in a process of its own.
#
# The at_exit hook registered first runs last: after Shutdown's.
require_relative "../../setup"

exiting_at = nil
at_exit { puts("EXIT TOOK #{Process.clock_gettime(Process::CLOCK_MONOTONIC) - exiting_at}") }
producer = make_producer(kafka: { "bootstrap.servers": "127.0.0.1:1" }, max_wait_timeout: 500)
producer.monitor.subscribe("error.occurred") do |event|
  puts("ERROR-EVENT #{event[:type]} #{event[:error].class} #{event[:error].message}") if event[:type] == "producer.close_at_exit"
end
producer.monitor.subscribe("message.purged") { |_event| puts("PURGED") }
4.times { |i| producer.produce_async(topic: "sluice-spec-1p", payload: "lost #{i}") }
2.times { |i| producer.buffer(topic: "sluice-spec-1p", payload: "lost buffered #{i}") }
exiting_at = Process.clock_gettime(Process::CLOCK_MONOTONIC)
