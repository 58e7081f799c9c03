# frozen_string_literal: true

# A scenario of spec/integration/lifecycle/close_from_callback_spec.rb, in a process of its own.
#
# The application closes the producer while one of its listeners closes it
# too (shutdown racing a close-on-error listener). The listener's close
# starts once the application's close is under way (it refuses new work).
require_relative "../../setup"

require "timeout"
producer = make_producer
producer.produce_sync(topic: "sluice-spec-1p", payload: "warm-up")
in_listener = Queue.new
go = Queue.new
listener_closed = Queue.new
producer.monitor.subscribe("message.acknowledged") do |_event|
  in_listener << true
  go.pop
  producer.close
  listener_closed << true
end
producer.produce_async(topic: "sluice-spec-1p", payload: "closed twice")
in_listener.pop
closer = Thread.new { producer.close }
closing = lambda do
  producer.flush(0)
  false
rescue Sluice::Errors::ProducerClosedError
  true
end
Thread.pass until closing.call
go << true
r = { "app_close_returned" => !closer.join(2).nil? }
r["listener_close_returned"] = begin
  Timeout.timeout(0.5) { listener_closed.pop }
rescue Timeout::Error
  false
end
r["closed"] = producer.closed?
result(r)
exit!(0) # a deadlocked close would keep the process from exiting
