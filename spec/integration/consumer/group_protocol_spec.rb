# frozen_string_literal: true

require "securerandom"

# "group.protocol": "consumer" (KIP-848) against the test broker: a Kafka 4
# broker assigns the member and it reads; an older one (bin/kafka's 3.9.1
# default) has no ConsumerGroupHeartbeat, where librdkafka as released waits
# for an assignment forever and says so only in its debug log. The bundled
# librdkafka's patch 0008 reports it, and the consumer's read raises a named
# error within seconds.
RSpec.describe "Consumer with group.protocol consumer (KIP-848)", :kafka, timeout: 60 do
  let(:topic) { "sluice-spec-1p" }

  def kip848_consumer = build_consumer("group.protocol": "consumer", "auto.offset.reset": "earliest")

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  it "reads what is produced on a broker with the protocol",
     skip: (!TestKafka.group_protocol_consumer? && "Kafka #{TestKafka::VERSION} has no KIP-848 group protocol") ||
           (Gem::Version.new(Sluice.librdkafka_version) < Gem::Version.new("2.4") && "librdkafka #{Sluice.librdkafka_version} has no KIP-848") do
    payload = SecureRandom.hex(8)
    build_producer.produce_sync(topic: topic, payload: payload)
    consumer = kip848_consumer
    consumer.subscribe(topic)
    expect(poll_until_payload(consumer, payload)).to eq(payload)
  end

  it "raises GroupProtocolUnsupportedError from a read within seconds on a broker without it, naming the broker",
     skip: (TestKafka.group_protocol_consumer? && "Kafka #{TestKafka::VERSION} has the KIP-848 group protocol") ||
           (ENV["SLUICE_USE_SYSTEM_LIBRDKAFKA"] == "1" && "the system's librdkafka lacks patch 0008: its consumer waits silently") do
    consumer = kip848_consumer
    consumer.subscribe(topic)
    started = now
    error = nil
    begin
      consumer.poll(500) while now - started < 30
    rescue Sluice::Errors::GroupProtocolUnsupportedError => e
      error = e
    end
    expect(error).not_to be_nil, "no GroupProtocolUnsupportedError in 30 s"
    expect(error.code).to eq(:unsupported_feature)
    expect(error.message).to include("group.protocol=classic", "ConsumerGroupHeartbeatRequest not supported by broker", "Kafka 4.0")
    puts format("group protocol: KIP-848 consumer against Kafka %<version>s raised after %<after>.2fs: %<message>s",
                version: TestKafka::VERSION, after: now - started, message: error.message)
    # Not fatal: the consumer reads on (a rolling upgrade may bring the protocol); the report comes every 5 s at most.
    expect(consumer.poll(100)).to be_nil
  end
end
