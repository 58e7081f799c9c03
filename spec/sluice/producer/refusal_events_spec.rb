# frozen_string_literal: true

# A message refused before it was dispatched (invalid, or refused by
# librdkafka at once: too large, a partition past the topic's count) is an
# error.occurred event, as a failed delivery is (librdkafka.dispatch_error):
# the metrics listeners' error_occurred counts every failed produce, as
# WaterDrop's do (issue 42). Once per refusal, whichever call refused it.
RSpec.describe "error.occurred for produces refused before dispatch" do
  let(:events) { [] }
  let(:producer) do
    producer = Sluice::Producer.new do |config|
      config.kafka = { "bootstrap.servers": SpecHelpers::UNREACHABLE, "message.max.bytes": 1_000 }
      config.client_class = Sluice::Clients::Buffered
      config.logger = Logger.new(nil)
    end
    test_producers << producer
    producer.client.partition_counts["t"] = 2
    producer.monitor.subscribe("error.occurred") do |event|
      events << [event[:type], event[:error].class, event[:error].respond_to?(:code) && event[:error].code]
    end
    producer
  end

  def refused(&call)
    call.call
    raise "not refused"
  rescue Sluice::Errors::BaseError => e
    e.class
  end

  it "reports each refusal of produce_async, produce_sync and produce_many_*, once, with the call's type" do
    too_big = { topic: "t", payload: "x" * 2_000 }
    expect(refused { producer.produce_async(too_big) }).to eq(Sluice::Errors::ProduceError)
    expect(refused { producer.produce_sync(topic: "t", partition: 5, payload: "x") }).to eq(Sluice::Errors::ProduceError)
    expect(refused { producer.produce_sync(topic: "t", payload: 42) }).to eq(Sluice::Errors::MessageInvalidError)
    expect(refused { producer.produce_many_async([{ topic: "t", payload: "ok" }, too_big]) }).to eq(Sluice::Errors::ProduceManyError)
    expect(refused { producer.produce_many_sync([{ topic: "t", payload: 42 }]) }).to eq(Sluice::Errors::MessageInvalidError)
    expect(events).to eq([
                           ["message.produce_async", Sluice::Errors::ProduceError, :msg_size_too_large],
                           ["message.produce_sync", Sluice::Errors::ProduceError, :unknown_partition],
                           ["message.produce_sync", Sluice::Errors::MessageInvalidError, false],
                           ["messages.produce_many_async", Sluice::Errors::ProduceManyError, :msg_size_too_large],
                           ["messages.produce_many_sync", Sluice::Errors::MessageInvalidError, false]
                         ])
  end

  it "reports nothing for what it dispatched" do
    producer.produce_sync(topic: "t", payload: "fine")
    producer.produce_many_sync([{ topic: "t", payload: "a" }, { topic: "t", partition: 1, payload: "b" }])
    expect(events).to eq([])
  end
end
