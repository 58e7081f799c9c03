# frozen_string_literal: true

# A scenario of spec/integration/lifecycle/close_from_callback_spec.rb, in a process of its own.
#
# :fd bookkeeping: both producers of the global poller closed from a
# listener, then a new producer; count and thread follow. (A regression,
# fixed in da71e67: the count stayed at 2.)
require_relative "../../setup"

poller = Sluice::Polling::Poller.instance
a = make_producer(mode: :fd)
b = make_producer(mode: :fd)
done = Queue.new
a.monitor.subscribe("message.acknowledged") do |_event|
  a.close
  b.close
  done << [poller.count, Thread.current.name]
end
a.produce_async(topic: "sluice-spec-1p", payload: "closes both")
r = {}
r["count_in_callback"], r["thread"] = done.pop
r["count_after"] = poller.count
c = make_producer(mode: :fd)
r["count_with_new"] = poller.count
r["new_delivers"] = c.produce_sync(topic: "sluice-spec-1p", payload: "after").error.nil?
r["alive_with_new"] = poller.alive?
c.close
r["final"] = [poller.alive?, poller.count]
result(r)
