# frozen_string_literal: true

# A scenario of spec/integration/lifecycle/close_from_signals_spec.rb, in a process of its own.
#
# After at_exit, Ruby kills every other thread, then runs finalizers: the
# poller thread is gone by then, so close must serve its own queue.
require_relative "../../setup"

producer = make_producer(kafka: { "linger.ms": 300 })
handle = producer.produce_async(topic: "sluice-spec-1p", payload: "teardown")
Sluice::Shared::Shutdown.untrack(producer) # as if the exit hook had not got to it
ObjectSpace.define_finalizer(Object.new, proc do
  producer.close
  result("closed" => producer.closed?, "delivered" => !handle.pending? && handle.error.nil?)
end)
