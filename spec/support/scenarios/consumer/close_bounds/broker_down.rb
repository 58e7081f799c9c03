# frozen_string_literal: true

# A scenario of spec/integration/consumer/close_bounds_spec.rb, in a process of its own.
#
# Item 9: no broker answers. A commit and the commit inside close wait
# at most their timeout; what could not be committed is reported.
require_relative "../../setup"
require_relative "helpers"

consumer = make_consumer(brokers: "127.0.0.1:1", max_wait_timeout: 2_000)
errors = []
consumer.monitor.subscribe("error.occurred") { |event| errors << event[:type] }
consumer.assign(TOPIC => { 0 => 5 })
started = now
commit_error = begin
  consumer.commit(TOPIC => { 0 => 7 })
rescue Sluice::Errors::ConsumerError => e
  e.message
end
commit_seconds = now - started
message = Sluice::Message.new(TOPIC, 0, 9) # what each_message stores: the offset after it
consumer.store_offset(message)
started = now
consumer.close(timeout: 2_000)
result("commit_seconds" => commit_seconds, "commit_error" => commit_error, "close_seconds" => now - started,
       "closed" => consumer.closed?, "errors" => errors.uniq.sort - ["librdkafka.error"])
