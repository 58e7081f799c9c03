# frozen_string_literal: true

# Helpers of the interrupted-call scenarios (spec/integration/lifecycle/interrupted_calls_spec.rb).
require "timeout"

def clock = Process.clock_gettime(Process::CLOCK_MONOTONIC)

# Messages to a broker where nothing listens stay queued until close purges them.
def stuck_producer = make_producer(kafka: { "bootstrap.servers": "127.0.0.1:1" })

# Starts the block on a thread and returns once that thread sleeps (in
# the native wait or on the delivery condition variable).
def blocked_thread(&block)
  thread = Thread.new(&block)
  thread.report_on_exception = false
  Thread.pass until thread.status == "sleep" || !thread.alive?
  thread
end

def outcome_of(thread)
  thread.join
  "returned"
rescue Exception => e # rubocop:disable Lint/RescueException
  e.class.name
end

def timed_close(producer, timeout)
  started = clock
  producer.close(timeout: timeout)
  { "closed" => producer.closed?, "close_s" => clock - started, "outstanding" => producer.outstanding }
end

def resolutions(handles) = handles.map { |h| h.pending? ? "pending" : (h.error&.code || "delivered").to_s }.tally
