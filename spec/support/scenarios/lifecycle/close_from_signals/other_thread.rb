# frozen_string_literal: true

# A scenario of spec/integration/lifecycle/close_from_signals_spec.rb, in a process of its own.
#
# Another thread closes while this one is blocked in produce_sync.
require_relative "../../setup"

producer = make_producer(kafka: { "linger.ms": 300 })
producer.produce_sync(topic: "sluice-spec-1p", payload: "warm-up")
waiting = Thread.new { producer.produce_sync(topic: "sluice-spec-1p", payload: "waits") }
Thread.pass until waiting.status == "sleep"
producer.close
report = waiting.value
result("closed" => producer.closed?, "waiter_delivered" => report.error.nil?)
