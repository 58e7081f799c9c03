# frozen_string_literal: true

# A scenario of spec/integration/lifecycle/close_from_signals_spec.rb, in a process of its own.
#
# A finalizer runs wherever the GC decides, between two Ruby instructions.
require_relative "../../setup"

producer = make_producer(kafka: { "linger.ms": 200 })
handle = producer.produce_async(topic: "sluice-spec-1p", payload: "finalizer")
outcome = Queue.new
ObjectSpace.define_finalizer(Object.new, proc do
  producer.close
  outcome << { "closed" => producer.closed?, "delivered" => !handle.pending? && handle.error.nil? }
rescue Exception => e # rubocop:disable Lint/RescueException
  outcome << { "error" => "#{e.class}: #{e.message}" }
end)
GC.start until outcome.size.positive?
result(outcome.pop)
