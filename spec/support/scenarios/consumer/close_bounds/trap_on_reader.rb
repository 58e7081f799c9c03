# frozen_string_literal: true

# A scenario of spec/integration/consumer/close_bounds_spec.rb, in a process of its own.
#
# Item 3: the usual single-threaded worker; TERM arrives while it reads.
require_relative "../../setup"
require_relative "helpers"

produce_some(3)
consumer = make_consumer(max_wait_timeout: 5_000)
trapped_at = nil
trap("TERM") do
  trapped_at = now
  consumer.close
end
consumer.subscribe(TOPIC)
consumer.each_message { Process.kill("TERM", Process.pid) unless trapped_at }
result("closed" => consumer.closed?, "seconds" => now - trapped_at,
       "refused" => (begin; consumer.assignment; rescue Sluice::Errors::ConsumerClosedError; true; end))
