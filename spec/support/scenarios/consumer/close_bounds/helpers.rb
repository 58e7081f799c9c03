# frozen_string_literal: true

# What every scenario of spec/integration/consumer/close_bounds_spec.rb starts with.
TOPIC = "sluice-spec-close"
def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

def make_consumer(brokers: BROKERS, max_wait_timeout: 10_000, **kafka)
  Sluice::Consumer.new do |config|
    config.kafka = { "bootstrap.servers": brokers, "group.id": "sluice-close-#{rand(1 << 30)}",
                     "auto.offset.reset": "earliest" }.merge(kafka)
    config.polling.mode = MODE
    config.max_wait_timeout = max_wait_timeout
    config.logger = Logger.new($stderr, level: Logger::FATAL)
  end
end

def produce_some(count)
  producer = make_producer
  count.times { |i| producer.produce_async(topic: TOPIC, partition: i % 3, payload: "close #{i}") }
ensure
  producer&.close
end
