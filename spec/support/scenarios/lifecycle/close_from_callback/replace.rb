# frozen_string_literal: true

# A scenario of spec/integration/lifecycle/close_from_callback_spec.rb, in a process of its own.
#
# The listener closes the last producer and creates its replacement — the
# recreate-on-error pattern. The replacement logs (debug) from its start,
# so events are queued before its wake-up pipe exists: it is served at
# once only if its registration serves it (periodic polls every 10 s).
require_relative "../../setup"

settings = ->(config) { config.polling.fd.periodic_poll_interval = 10_000 }
old = make_producer(&settings)
old.produce_sync(topic: "sluice-spec-1p", payload: "warm-up")
replacements = Queue.new
old.monitor.subscribe("message.acknowledged") do |_event|
  old.close
  replacements << make_producer(kafka: { debug: "generic" }, logger: Logger.new(File::NULL), max_wait_timeout: 2_000, &settings)
rescue Exception => e # rubocop:disable Lint/RescueException
  replacements << "#{e.class}: #{e.message}"
end
old.produce_async(topic: "sluice-spec-1p", payload: "replace me")
replacement = replacements.pop
r = { "old_closed" => old.closed? }
r["replacement"] = begin
  replacement.produce_sync(topic: "sluice-spec-1p", payload: "from the replacement").error.nil?
rescue StandardError => e
  "#{e.class}: #{e.message}"
end
if r["replacement"] == true
  replacement.close
  poller = Sluice::Polling::Poller.instance
  r["after_all"] = [poller.alive?, poller.count]
end
result(r)
exit!(0) unless r["replacement"] == true # a stuck replacement would make close wait for the periodic poll
