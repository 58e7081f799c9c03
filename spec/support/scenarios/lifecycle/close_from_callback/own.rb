# frozen_string_literal: true

# A scenario of spec/integration/lifecycle/close_from_callback_spec.rb, in a process of its own.
#
# The listener closes its own producer; five messages are in flight.
require_relative "../../setup"

producer = make_producer
bystander = make_producer
[producer, bystander].each { |p| p.produce_sync(topic: "sluice-spec-1p", payload: "warm-up") }
inside = Queue.new
calls = 0
producer.monitor.subscribe("message.acknowledged") do |_event|
  # Acks of the other messages may be dispatched while this close
  # serves the queue (when they come in other batches): those nested
  # calls return at once, the outer close finishes the job.
  next if (calls += 1) > 1

  producer.close
  inside << { "returned" => true, "closed_inside" => producer.closed?, "thread" => Thread.current.name }
rescue Exception => e # rubocop:disable Lint/RescueException
  inside << { "error" => "#{e.class}: #{e.message}" }
end
handles = producer.produce_many_async(Array.new(5) { |i| { topic: "sluice-spec-1p", payload: "closes itself #{i}" } })
r = inside.pop
r["closed_main"] = producer.closed?
r["handles"] = handles.map { |h| h.wait.error.nil? }
r["refuses"] = begin
  producer.produce_async(topic: "sluice-spec-1p", payload: "after")
  "accepted"
rescue Sluice::Errors::ProducerClosedError => e
  e.class.name
end
r["bystander"] = bystander.produce_sync(topic: "sluice-spec-1p", payload: "still served").error.nil?
poller = Sluice::Polling::Poller.instance
r["count_with_bystander"] = poller.count
bystander.close
r["after_all"] = [poller.alive?, poller.count]
r["mode"] = MODE
result(r)
