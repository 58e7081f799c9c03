# frozen_string_literal: true

# A scenario of spec/integration/lifecycle/close_from_callback_spec.rb, in a process of its own.
#
# A's listener closes B, which has a message lingering in its queue.
require_relative "../../setup"

a = make_producer
b = make_producer(kafka: { "linger.ms": 300 })
[a, b].each { |p| p.produce_sync(topic: "sluice-spec-1p", payload: "warm-up") }
inside = Queue.new
a.monitor.subscribe("message.acknowledged") do |_event|
  next if b.closed?

  b.close
  inside << { "returned" => true, "b_closed" => b.closed?, "thread" => Thread.current.name }
rescue Exception => e # rubocop:disable Lint/RescueException
  inside << { "error" => "#{e.class}: #{e.message}" }
end
lingering = b.produce_async(topic: "sluice-spec-1p", payload: "lingers while B is closed")
a.produce_async(topic: "sluice-spec-1p", payload: "closes B")
r = inside.pop
r["b_closed_main"] = b.closed?
r["lingering_pending_after_close"] = lingering.pending?
r["lingering_ok"] = lingering.wait.error.nil?
r["a_still_works"] = a.produce_sync(topic: "sluice-spec-1p", payload: "A goes on").error.nil?
poller = Sluice::Polling::Poller.instance
r["count_with_a"] = poller.count
a.close
r["after_all"] = [poller.alive?, poller.count]
r["mode"] = MODE
result(r)
