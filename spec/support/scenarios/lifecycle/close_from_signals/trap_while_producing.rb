# frozen_string_literal: true

# A scenario of spec/integration/lifecycle/close_from_signals_spec.rb, in a process of its own.
#
# The handler interrupts a thread that is producing as fast as it can:
# neither side may deadlock, and what was accepted is delivered.
require_relative "../../setup"

producer = make_producer
producer.produce_sync(topic: "sluice-spec-many", payload: "warm-up")
outcome = Queue.new
trap("TERM") do
  producer.close
  outcome << producer.closed?
rescue Exception => e # rubocop:disable Lint/RescueException
  outcome << "#{e.class}: #{e.message}"
end
handles = []
refused = nil
killer = Thread.new do
  sleep 0.05
  Process.kill("TERM", Process.pid)
end
begin
  loop { handles << producer.produce_async(topic: "sluice-spec-many", payload: "busy #{handles.size}") }
rescue Sluice::Errors::ProducerClosedError => e
  refused = e.class.name
end
killer.join
result("closed" => outcome.pop, "refused" => refused, "accepted" => handles.size,
       "delivered" => handles.count { |h| !h.pending? && h.error.nil? })
