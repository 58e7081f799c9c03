# frozen_string_literal: true

require "sluice/testing"

# Sluice::Testing::Consumer runs retries: and dead_letter: as Sluice::Consumer
# does (Consumer::Failure), so an application's spec can assert what its
# poison messages become without a broker.
RSpec.describe "Sluice::Testing::Consumer failure policies" do
  let(:consumer) { Sluice::Testing::Consumer.new(id: "billing") }
  let(:producer) { Sluice::Testing.producer }
  let(:quick) { { attempts: 3, backoff: 0.001..0.001 } }
  let(:injected) { Class.new(StandardError) }
  let(:poison) { ->(_message) { raise injected, "poison" } }

  after do
    consumer.close
    producer.close
  end

  before do
    consumer.feed(topic: "orders", key: "order-7", payload: "poison", headers: { "trace" => "t-1" }, partition: 0)
    consumer.feed(topic: "orders", key: "order-8", payload: "fine", partition: 0)
    consumer.subscribe("orders")
  end

  it "runs a failed block again, then dead-letters the message with its origin, and goes on" do
    runs = Hash.new(0)
    consumer.each_message(retries: quick, dead_letter: { topic: "orders.dlq", producer: producer }) do |message|
      runs[message.payload] += 1
      raise injected, "cannot bill" if message.payload == "poison"
    end
    expect(runs).to eq("poison" => 3, "fine" => 1)
    expect(producer).to have_produced(topic: "orders.dlq", key: "order-7", payload: "poison", partition: 0).once
    expect(producer).to have_produced(headers: hash_including("trace" => "t-1", "source_topic" => "orders", "source_offset" => "0",
                                                              "source_consumer_group" => "billing", "source_attempts" => "3",
                                                              "error_message" => "cannot bill"))
    consumer.commit
    expect(consumer.committed).to eq("orders" => { 0 => 2 })
  end

  it "counts what a concurrent read holds, as Sluice::Consumer#in_flight" do
    consumer.feed(topic: "orders", key: "order-7", payload: "later", partition: 0)
    seen = Queue.new
    gate = Queue.new
    failed = false
    thread = Thread.new do
      consumer.each_message(concurrency: 4, retries: { attempts: 2, backoff: 0.001..0.001 }) do |message|
        if message.payload == "poison" && !failed
          failed = true
          raise injected, "fails once"
        end

        seen << message.payload
        gate.pop unless message.payload == "later"
      end
    end
    2.times { seen.pop } # poison's retry and fine run; later waits in order-7's lane
    expect(consumer.in_flight).to eq(running: 1, waiting: 1, retrying: 1)
    consumer.stop
    3.times { gate << true }
    thread.join
    expect(consumer.in_flight).to eq(running: 0, waiting: 0, retrying: 0)
  end

  it "does the same with concurrency and for each_batch" do
    consumer.each_message(concurrency: 2, retries: quick, dead_letter: { topic: "orders.dlq", producer: producer }) do |message|
      raise injected, "cannot bill" if message.payload == "poison"
    end
    expect(producer).to have_produced(topic: "orders.dlq", payload: "poison").once
    consumer.seek("orders", 0, 0)
    consumer.each_batch(dead_letter: { topic: "orders.dlq", producer: producer }, &poison)
    expect(producer).to have_produced(topic: "orders.dlq", headers: hash_including("error_message" => "poison")).twice
  end

  it "stores nothing when retries run out without a dead letter" do
    expect { consumer.each_message(retries: quick, &poison) }.to raise_error(injected)
    consumer.commit
    expect(consumer.committed).to eq("orders" => { 0 => Sluice::Testing::Consumer::NO_OFFSET })
  end

  it "produces a failed message to its next retry topic, and one failing there to the dead-letter topic" do
    policy = { retry_topics: [5, 60], dead_letter: { topic: "orders.dlq", producer: producer } }
    consumer.each_message(**policy) { |message| raise injected, "cannot bill" if message.payload == "poison" }
    expect(producer).to have_produced(topic: "orders.retry.5s", key: "order-7", payload: "poison", partition: 0,
                                      headers: hash_including("source_topic" => "orders", "source_attempts" => "1",
                                                              "retry_due" => match(/\A\d+\z/))).once
    copy = producer.client.messages.find { |message| message[:topic] == "orders.retry.5s" }
    consumer.feed(topic: "orders.retry.60s", payload: "poison", headers: copy[:headers], partition: 0)
    consumer.subscribe("orders", "orders.retry.60s")
    consumer.each_message(**policy, &poison)
    expect(producer).to have_produced(topic: "orders.dlq", headers: hash_including("source_topic" => "orders", "source_attempts" => "2"))
  end

  it "needs a producer for dead letters" do
    expect { consumer.each_message(dead_letter: "orders.dlq") { nil } }.to raise_error(ArgumentError, /producer/)
  end
end
