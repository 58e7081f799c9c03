# frozen_string_literal: true

# A scenario of spec/integration/lifecycle/close_from_signals_spec.rb, in a process of its own.
#
# The handler runs on the main thread while it waits in Queue#pop.
require_relative "../../setup"

producer = make_producer(kafka: { "linger.ms": 200 })
producer.produce_sync(topic: "sluice-spec-1p", payload: "warm-up")
handles = Array.new(20) { |i| producer.produce_async(topic: "sluice-spec-1p", payload: "trap #{i}") }
outcome = Queue.new
trap("TERM") do
  producer.close
  outcome << { "closed" => producer.closed? }
rescue Exception => e # rubocop:disable Lint/RescueException
  outcome << { "error" => "#{e.class}: #{e.message}" }
end
Process.kill("TERM", Process.pid)
r = outcome.pop
r["delivered"] = handles.count { |h| !h.pending? && h.error.nil? }
result(r)
