# frozen_string_literal: true

# A scenario of spec/integration/lifecycle/close_from_signals_spec.rb, in a process of its own.
require_relative "../../setup"

producer = make_producer(kafka: { "linger.ms": 300 })
handles = Array.new(10) { |i| producer.produce_async(topic: "sluice-spec-1p", payload: "at_exit #{i}") }
at_exit do
  producer.close
  result("closed" => producer.closed?, "delivered" => handles.count { |h| !h.pending? && h.error.nil? })
end
