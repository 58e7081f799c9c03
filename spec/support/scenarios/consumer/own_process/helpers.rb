# frozen_string_literal: true

# What every consumer scenario of spec/integration/consumer/own_process_spec.rb starts with.

# librdkafka's floor for max.poll.interval.ms is session.timeout.ms.
GROUP_TIMERS = { "session.timeout.ms": 6_000, "heartbeat.interval.ms": 1_000, "max.poll.interval.ms": 10_000 }.freeze

def make_consumer(group: "sluice-spec-scenario-#{rand(1 << 30)}", **kafka)
  Sluice::Consumer.new do |config|
    config.kafka = { "bootstrap.servers": BROKERS, "group.id": group, "auto.offset.reset": "earliest" }.merge(kafka)
    config.polling.mode = MODE
    config.logger = Logger.new($stderr, level: Logger::ERROR)
  end
end

# Records name => payloads of the consumer's events.
def record(consumer, *names)
  seen = Hash.new { |h, k| h[k] = [] }
  names.each { |name| consumer.monitor.subscribe(name) { |event| seen[name] << event.payload } }
  seen
end

def wait_for(seconds, what)
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
  sleep 0.05 until yield || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
  raise "no #{what} within #{seconds}s" unless yield
end
