# frozen_string_literal: true

# A scenario of spec/integration/lifecycle/interrupted_calls_spec.rb, in a process of its own.
#
# Timeout.timeout around a flush that would succeed (one message per
# request, one request in flight: 20,000 round trips take well over
# 0.1 s, about 2 s here; with 5,000 the flush once beat the timeout): the
# messages are not lost, close delivers them.
require_relative "../../setup"
require_relative "helpers"

producer = make_producer(kafka: { "batch.num.messages": 1, "max.in.flight.requests.per.connection": 1 })
producer.produce_sync(topic: "sluice-spec-many", payload: "warm-up")
handles = Array.new(20_000) { |i| producer.produce_async(topic: "sluice-spec-many", payload: "slow #{i}") }
timed_out = begin
  Timeout.timeout(0.1) { producer.flush }
  false
rescue Timeout::Error
  true
end
result({ "timed_out" => timed_out }.merge(timed_close(producer, 20_000), "handles" => resolutions(handles)))
