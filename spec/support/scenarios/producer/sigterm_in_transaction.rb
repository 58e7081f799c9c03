# frozen_string_literal: true

# A scenario of spec/integration/producer/transaction_outage_spec.rb, in a process of its own: a
# transaction whose broker the spec kills, then a SIGTERM whose handler closes the producer. ARGV: the
# producer's max_wait_timeout (ms) and the topic. Says READY inside the transaction, then reads a byte
# from stdin (the broker is killed meanwhile) and lets the commit begin.
require_relative "../setup"

wait_ms = Integer(ARGV.fetch(0))
topic = ARGV.fetch(1)
producer = make_producer(kafka: { "bootstrap.servers": BROKERS, "transactional.id": "sluice-term-#{rand(1 << 30)}" }) do |config|
  config.max_wait_timeout = wait_ms
end
producer.transaction { producer.produce_sync(topic: topic, payload: "before") }
trap("TERM") { producer.close(timeout: wait_ms) }
begin
  producer.transaction do
    producer.produce_async(topic: topic, payload: "during")
    $stdout.puts("READY")
    $stdin.read(1) # the broker is killed, then TERM comes
  end
rescue Sluice::Errors::BaseError => e
  $stdout.puts("ENDED #{e.class}")
end
$stdout.puts("CLOSED #{producer.closed?}")
