# frozen_string_literal: true

# A scenario of spec/integration/lifecycle/interrupted_calls_spec.rb, in a process of its own.
#
# The first partition_key of a topic waits for metadata (the broker is
# unreachable here). That native call cannot be cut short (librdkafka
# has no way to cancel a metadata request): the interrupt is raised
# once it returned, after max_wait_timeout at most.
require_relative "../../setup"
require_relative "helpers"

producer = make_producer(kafka: { "bootstrap.servers": "127.0.0.1:1" }, max_wait_timeout: 1_000)
handle = producer.produce_async(topic: "sluice-spec-3p", payload: "plain")
started = clock
outcome = begin
  Timeout.timeout(0.3) { producer.produce_async(topic: "sluice-spec-3p", payload: "keyed", partition_key: "k") }
  "returned"
rescue Timeout::Error
  "Timeout::Error"
end
r = { "outcome" => outcome, "timeout_s" => clock - started }
result(r.merge(timed_close(producer, 200), "handles" => resolutions([handle])))
