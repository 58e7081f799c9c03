# frozen_string_literal: true

require "logger"

# After an assignment librdkafka asks the group coordinator for the committed
# offsets before it fetches. When that query fails as a whole, as it does
# while the coordinator moves (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS),
# librdkafka as released left the partitions waiting for good: in the group,
# heartbeating, never fetching (librdkafka issue 5586; CI's rolling upgrade
# met it on a node's restart). The bundled librdkafka's patch 0010 queries
# again after retry.backoff.ms.
#
# A real cluster gives that answer only by chance, at a restart: librdkafka's
# mock cluster (made by the consumer, test.mock.num.brokers) gives it on
# demand, to the consumer's next OffsetFetch requests.
unpatched = ENV["SLUICE_USE_SYSTEM_LIBRDKAFKA"] == "1" && "the system's librdkafka lacks patch 0010: its partitions wait for good"
RSpec.describe "Consumer: committed offsets queried again after the coordinator moved (mock cluster)", timeout: 60, skip: unpatched do
  offset_fetch = 9 # Kafka's ApiKey
  not_coordinator = 16
  coordinator_load_in_progress = 14

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  def mock_consumer
    Sluice::Consumer.new do |config|
      config.kafka = { "test.mock.num.brokers": 1, "group.id": "sluice-spec-mock-#{rand(1 << 30)}", "auto.offset.reset": "earliest",
                       "retry.backoff.ms": 100 }
      config.polling.mode = TestKafka::MODE
      config.logger = Logger.new(nil)
    end
  end

  def produce_to(bootstraps, topic, payload)
    producer = build_producer(kafka: { "bootstrap.servers": bootstraps })
    producer.produce_sync(topic: topic, partition: 0, payload: payload)
  ensure
    producer&.close
  end

  # @return [Sluice::Message, nil] the first message within seconds
  def first_message(consumer, seconds) = poll_messages(consumer, 1, seconds: seconds, poll_ms: 100).first

  [[not_coordinator], [coordinator_load_in_progress, not_coordinator]].each do |codes|
    it "reads the assigned partition after its OffsetFetch failed with #{codes.join(", ")}" do
      consumer = mock_consumer
      produce_to(Sluice::Native::TestHooks.mock_bootstraps(consumer.native), "sluice-spec-mock", "p")
      Sluice::Native::TestHooks.mock_push_request_errors(consumer.native, offset_fetch, codes)
      started = now
      consumer.assign("sluice-spec-mock" => [0])
      message = first_message(consumer, 20)
      expect(message&.payload).to eq("p"), "the partition was never fetched: its committed offset was not queried again"
      puts format("offset fetch retry: %<codes>s answered, the partition read %<after>.2fs after assign", codes: codes.inspect, after: now - started)
    ensure
      consumer&.close
    end
  end
end
