# frozen_string_literal: true

# A scenario of spec/integration/lifecycle/interrupted_calls_spec.rb, in a process of its own.
#
# Thread#raise and Thread#kill into flush and produce_sync.
require_relative "../../setup"
require_relative "helpers"

producer = stuck_producer
handles = Array.new(3) { |i| producer.produce_async(topic: "sluice-spec-1p", payload: "stuck #{i}") }
r = {}
flusher = blocked_thread { producer.flush }
flusher.raise(RuntimeError, "stop flushing")
r["raised_flush"] = outcome_of(flusher)
flusher = blocked_thread { producer.flush }
flusher.kill
r["killed_flush"] = outcome_of(flusher)
syncer = blocked_thread { producer.produce_sync(topic: "sluice-spec-1p", payload: "raised") }
syncer.raise(RuntimeError, "stop waiting")
r["raised_produce_sync"] = outcome_of(syncer)
syncer = blocked_thread { producer.produce_sync(topic: "sluice-spec-1p", payload: "killed") }
syncer.kill
r["killed_produce_sync"] = outcome_of(syncer)
r["flush_again"] = producer.flush(100)
r["inflight_before_close"] = producer.outstanding
r.merge!(timed_close(producer, 200))
result(r.merge("handles" => resolutions(handles)))
