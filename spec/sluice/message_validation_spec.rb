# frozen_string_literal: true

# Validation happens before librdkafka sees the message: no broker is needed.
RSpec.describe "Message validation" do
  let(:producer) { build_producer(kafka: { "bootstrap.servers": "127.0.0.1:1" }) }

  {
    "a non-Hash message" => ["payload", /message must be a Hash/],
    "a missing topic" => [{ payload: "x" }, /needs a :topic/],
    "a topic neither String nor Symbol" => [{ topic: 42, payload: "x" }, /topic must be a String or Symbol/],
    "an empty topic" => [{ topic: "", payload: "x" }, /1 to 249 characters/],
    "a topic with invalid characters" => [{ topic: "a b", payload: "x" }, /invalid characters/],
    "a non-String payload" => [{ topic: "t", payload: 1 }, /payload must be a String or nil/],
    "a non-String key" => [{ topic: "t", payload: "x", key: 1 }, /key must be a String/],
    "a non-Integer partition" => [{ topic: "t", payload: "x", partition: "0" }, /partition must be an Integer/],
    "a negative partition" => [{ topic: "t", payload: "x", partition: -2 }, /partition must be -1/],
    "headers that are not a Hash" => [{ topic: "t", payload: "x", headers: [1] }, /headers must be a Hash/],
    "a non-String header name" => [{ topic: "t", payload: "x", headers: { a: "1" } }, /header names must be Strings/],
    "a bad header value" => [{ topic: "t", payload: "x", headers: { "a" => 1 } }, /must be a String or an Array/],
    "a bad timestamp" => [{ topic: "t", payload: "x", timestamp: "now" }, /timestamp must be a Time or Integer/],
    "an unknown key" => [{ topic: "t", payload: "x", topik: "t" }, /unknown message keys: \[:topik\]/]
  }.each do |what, (message, pattern)|
    it "refuses #{what} before anything is enqueued" do
      expect { producer.produce_async(message) }.to raise_error(Sluice::Errors::MessageInvalidError, pattern)
      expect(producer.outstanding).to eq(0)
    end
  end

  it "enqueues nothing from a batch with one invalid message" do
    batch = [{ topic: "t", payload: "a" }, { topic: "t", payload: 2 }]
    expect { producer.produce_many_async(batch) }.to raise_error(Sluice::Errors::MessageInvalidError)
    expect(producer.outstanding).to eq(0)
  end

  it "raises ProducerClosedError after close" do
    producer.close
    expect { producer.produce_async(topic: "t", payload: "x") }.to raise_error(Sluice::Errors::ProducerClosedError)
  end
end
