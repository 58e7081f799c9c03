# frozen_string_literal: true

require "sluice/testing"

# Sluice::Testing::Consumer: the offset, rewind, pause and seek rules of
# Sluice::Consumer, over messages a spec feeds it.
RSpec.describe Sluice::Testing::Consumer do
  subject(:consumer) { described_class.new }

  after { consumer.close }

  def feed_orders(*payloads, partition: 0) = payloads.map { |payload| consumer.feed(topic: "orders", payload: payload, partition: partition) }

  it "hands out fed messages as Sluice::Message, offsets counted per partition, in the order fed" do
    consumer.feed(topic: "orders", payload: "a", key: "k", headers: { "h" => %w[1 2] }, timestamp: Time.at(1_700_000_000, 5, :millisecond))
    consumer.feed(topic: "orders", payload: "b", partition: 1)
    consumer.feed(topic: "orders", payload: "c")
    consumer.subscribe("orders")

    seen = []
    consumer.each_message { |message| seen << message }

    expect(seen.map { |m| [m.partition, m.offset, m.payload] }).to eq([[0, 0, "a"], [1, 0, "b"], [0, 1, "c"]])
    expect(seen.first).to have_attributes(key: "k", headers: { "h" => %w[1 2] }, timestamp_ms: 1_700_000_000_005)
    expect(seen.first).to be_a(Sluice::Message)
    expect(consumer.assignment).to eq("orders" => [0, 1])
  end

  it "reads only subscribed or assigned topics" do
    consumer.feed(topic: "other", payload: "x")
    feed_orders("a")
    consumer.subscribe(:orders)
    expect(consumer.poll&.payload).to eq("a")
    expect(consumer.poll).to be_nil

    consumer.assign("other" => [0])
    expect(consumer.poll&.payload).to eq("x")
  end

  it "replaces what an earlier assign gave, as the real consumer does" do
    consumer.feed(topic: "other", payload: "x")
    feed_orders("a")
    consumer.assign("other" => [0])
    consumer.assign("orders" => [0])
    expect(consumer.assignment).to eq("orders" => [0])
    expect([consumer.poll&.payload, consumer.poll]).to eq(["a", nil])
  end

  it "stores an offset after each_message's block finished; commit commits what is stored" do
    feed_orders("a", "b")
    consumer.subscribe("orders")
    consumer.each_message { |_| nil }

    expect(consumer.committed).to eq("orders" => { 0 => Sluice::Testing::Consumer::NO_OFFSET })
    consumer.commit
    expect(consumer.committed).to eq("orders" => { 0 => 2 })
  end

  it "rewinds the partition to a message whose block raised: it is handed out again, its offset not stored" do
    feed_orders("a", "b", "c")
    consumer.subscribe("orders")
    attempts = Hash.new(0)

    expect { consumer.each_message { |m| raise "failed #{m.payload}" if (attempts[m.payload] += 1) == 1 && m.payload == "b" } }
      .to raise_error("failed b")
    consumer.commit
    expect(consumer.committed).to eq("orders" => { 0 => 1 })

    consumer.each_message { |m| attempts[m.payload] += 1 }
    expect(attempts).to eq("a" => 1, "b" => 2, "c" => 1)
    consumer.commit
    expect(consumer.committed).to eq("orders" => { 0 => 3 })
  end

  it "rewinds each partition of a batch that raised to its first message of the batch" do
    feed_orders("a0", "b0", partition: 0)
    feed_orders("a1", partition: 1)
    consumer.subscribe("orders")

    expect { consumer.each_batch(max_items: 10) { |batch| raise "no" unless batch.empty? } }.to raise_error("no")
    batches = []
    consumer.each_batch(max_items: 2) { |batch| batches << batch.map(&:payload) }

    expect(batches).to eq([%w[a0 b0], %w[a1]])
  end

  it "poll does not store: store_offset does" do
    feed_orders("a", "b")
    consumer.subscribe("orders")
    first = consumer.poll
    consumer.poll
    consumer.store_offset(first)
    consumer.commit
    expect(consumer.committed).to eq("orders" => { 0 => 1 })
  end

  it "poll(store: true) stores the message the poll before returned when it is read again, not at a commit" do
    feed_orders("a", "b", "c")
    consumer.subscribe("orders")
    expect(consumer.poll(0, store: true).payload).to eq("a")
    consumer.commit
    expect(consumer.committed).to eq("orders" => { 0 => Sluice::Testing::Consumer::NO_OFFSET })
    expect(consumer.poll(0, store: true).payload).to eq("b")
    consumer.commit
    expect(consumer.committed).to eq("orders" => { 0 => 1 })
    expect(consumer.poll(0, store: true).payload).to eq("c")
    consumer.commit # what close commits: "c" was handed, not finished
    expect(consumer.committed).to eq("orders" => { 0 => 2 })
  end

  it "poll(store: true)'s message is finished by the next read of any kind, and refuses an unknown keyword" do
    feed_orders("a", "b")
    consumer.subscribe("orders")
    consumer.poll(store: true)
    consumer.each_message { |m| consumer.stop if m.payload == "b" }
    consumer.commit
    expect(consumer.committed).to eq("orders" => { 0 => 2 })
    expect { consumer.poll(0, stor: true) }.to raise_error(ArgumentError, /unknown keyword: :stor/)
  end

  it "takes poll's store: from poll_store when a call does not pass it" do
    storing = described_class.new(poll_store: true)
    storing.feed(topic: "orders", payload: "a")
    storing.feed(topic: "orders", payload: "b")
    storing.subscribe("orders")
    storing.poll
    storing.poll
    storing.commit
    expect(storing.committed).to eq("orders" => { 0 => 1 })
  ensure
    storing&.close
  end

  it "pause skips nothing: resume hands out what the partition still had" do
    feed_orders("a0", "b0", partition: 0)
    feed_orders("a1", "b1", partition: 1)
    consumer.subscribe("orders")
    expect(consumer.poll.payload).to eq("a0")

    consumer.pause("orders", 0)
    rest = []
    consumer.each_message { |m| rest << m.payload }
    expect(rest).to eq(%w[a1 b1])

    consumer.resume("orders", 0)
    consumer.each_message { |m| rest << m.payload }
    expect(rest).to eq(%w[a1 b1 b0])
  end

  it "seek moves a partition's position, back or forward" do
    feed_orders("a", "b", "c")
    consumer.subscribe("orders")
    consumer.each_message { |_| nil }

    consumer.seek("orders", 0, 1)
    expect(consumer.poll.payload).to eq("b")
    consumer.seek("orders", 0, Sluice::Testing::Consumer::OFFSET_BEGINNING)
    expect(consumer.poll.payload).to eq("a")
  end

  it "refuses pause and seek of a partition it does not read, as the real consumer" do
    consumer.subscribe("orders")
    expect { consumer.pause("orders", 3) }.to raise_error(Sluice::Errors::ConsumerStateError, %r{orders/3 is not assigned})
    expect { consumer.seek("orders", 3, 0) }.to raise_error(Sluice::Errors::ConsumerStateError)
  end

  it "starts a partition at its committed offset" do
    feed_orders("a", "b", "c")
    consumer.commit("orders" => { 0 => 2 })
    consumer.subscribe("orders")
    expect(consumer.poll.payload).to eq("c")
  end

  it "stop ends each_message after the current message" do
    feed_orders("a", "b", "c")
    consumer.subscribe("orders")
    seen = []
    consumer.each_message do |m|
      seen << m.payload
      consumer.stop
    end
    expect(seen).to eq(%w[a])
    consumer.each_message { |m| seen << m.payload }
    expect(seen).to eq(%w[a b c])
  end

  it "poll waits up to its timeout for a message fed by another thread" do
    consumer.subscribe("orders")
    waiting = Queue.new
    reader = Thread.new do
      waiting << true
      consumer.poll(10_000)
    end
    waiting.pop
    feed_orders("late")
    expect(reader.value&.payload).to eq("late")
  end

  it "commits what is stored at close (auto_commit), then refuses every call" do
    consumer = described_class.new(id: "c1")
    consumer.feed(topic: "orders", payload: "a")
    consumer.subscribe("orders")
    consumer.each_message { |_| nil }
    consumer.close
    expect { consumer.poll }.to raise_error(Sluice::Errors::ConsumerClosedError, "consumer c1 is closed")
    expect(consumer).to be_closed
  end

  it "lets a Testing producer's transaction mark messages as consumed" do
    producer = Sluice::Testing.producer { |config| config.kafka = { "transactional.id": "testing-consumer" } }
    feed_orders("a")
    consumer.subscribe("orders")
    consumer.each_message do |message|
      producer.transaction do
        producer.produce_async(topic: "out", payload: message.payload.upcase)
        producer.transaction_mark_as_consumed(consumer, message)
      end
    end
    expect(producer).to have_produced(topic: "out", payload: "A").once
  ensure
    producer&.close
  end
end
