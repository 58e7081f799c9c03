# frozen_string_literal: true

# A scenario of spec/integration/lifecycle/interrupted_calls_spec.rb, in a process of its own.
#
# Timeout.timeout around a flush that can never finish.
require_relative "../../setup"
require_relative "helpers"

producer = stuck_producer
handles = Array.new(6) { |i| producer.produce_async(topic: "sluice-spec-1p", payload: "stuck #{i}") }
started = clock
timed_out = begin
  Timeout.timeout(0.3) { producer.flush }
  false
rescue Timeout::Error
  true
end
r = { "timed_out" => timed_out, "timeout_s" => clock - started }
started = clock
r["flush_again"] = producer.flush(100) # the native client is still usable
r["flush_again_s"] = clock - started
r.merge!(timed_close(producer, 200))
result(r.merge("handles" => resolutions(handles)))
