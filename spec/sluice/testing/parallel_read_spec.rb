# frozen_string_literal: true

require "sluice/testing"

# Sluice::Testing::Consumer#each_message(concurrency:): the real consumer's
# reading loop, workers and order rules over fed messages, with its offset
# rule (never stored past an unfinished block).
RSpec.describe Sluice::Testing::Consumer, "#each_message with concurrency" do
  subject(:consumer) { described_class.new }

  after { consumer.close }

  def feed(payloads, key: nil) = payloads.map { |payload| consumer.feed(topic: "orders", payload: payload, key: key) }

  def pop_within(queue, seconds = 10) = Timeout.timeout(seconds) { queue.pop }

  it "runs up to concurrency blocks at once" do
    feed(%w[a b c d])
    consumer.subscribe("orders")
    arrived = Queue.new
    go = Queue.new
    reader = Thread.new { consumer.each_message(concurrency: 4, ordering: :none) { |_| (arrived << true) && go.pop } }
    4.times { pop_within(arrived) }
    4.times { go << true }
    expect(reader.join(10)).to be(reader)
  end

  it "stores nothing past a block still running, however many after it finished" do
    feed(%w[a b c d e])
    consumer.subscribe("orders")
    later = Queue.new
    committed_meanwhile = nil
    consumer.each_message(concurrency: 5, ordering: :none) do |message|
      if message.offset.zero?
        4.times { pop_within(later) }
        consumer.commit
        committed_meanwhile = consumer.committed
      else
        later << true
      end
    end
    expect(committed_meanwhile).to eq("orders" => { 0 => described_class::NO_OFFSET })
    consumer.commit
    expect(consumer.committed).to eq("orders" => { 0 => 5 })
  end

  it "keeps a key's messages in order under :key while other keys pass a slow one" do
    feed(%w[s0 s1], key: "slow")
    feed(%w[a0 a1], key: "a")
    consumer.subscribe("orders")
    log = Queue.new
    a_done = Queue.new
    consumer.each_message(concurrency: 4, ordering: :key) do |message|
      log << [:start, message.payload]
      2.times { pop_within(a_done) } if message.payload == "s0"
      log << [:end, message.payload]
      a_done << true if message.key == "a"
    end
    events = Array.new(log.size) { log.pop }
    expect(events.index([:start, "s1"])).to be > events.index([:end, "s0"])
    expect(events.index([:end, "a1"])).to be < events.index([:end, "s0"])
  end

  it "raises a block's error once its siblings finished, and reads again from the failed message" do
    feed(%w[a b c d])
    consumer.subscribe("orders")
    expect { consumer.each_message(concurrency: 2, ordering: :partition) { |m| raise "boom" if m.payload == "b" } }.to raise_error("boom")
    again = []
    consumer.each_message { |message| again << message.payload }
    expect(again).to eq(%w[b c d])
  end

  # Issue 59: one reading loop. The double answers what the real loop asks of an Inbox; it has none of its own.
  it "runs the real consumer's reading loop (Consumer::ParallelReading) over the double, with its settings" do
    feed(%w[a b])
    consumer.subscribe("orders")
    expect(Sluice::Consumer::ParallelReading).to receive(:new)
      .with(hash_including(inbox: an_instance_of(Sluice::Testing::Inbox), concurrency: 2, ordering: :none, max_buffered_bytes: 64))
      .and_call_original
    read = []
    consumer.each_message(concurrency: 2, ordering: :none, max_buffered_bytes: 64) { |message| read << message.payload }

    expect(read).to contain_exactly("a", "b")
  end

  it "refuses settings out of range, as the real consumer does" do
    expect { consumer.each_message(concurrency: 2, ordering: :fifo) { nil } }.to raise_error(ArgumentError, /ordering is one of/)
  end
end
