# frozen_string_literal: true

# producer.middleware: steps run on every message before validation, for
# single and batch produce and for buffering.
RSpec.describe "Middleware (#{TestKafka::MODE} mode)", :kafka do
  let(:producer) { build_producer }
  let(:topic) { "sluice-spec-1p" }

  it "runs appended steps in order and produces what the last one returned" do
    producer.middleware.append(->(message) { message.merge(headers: { "step" => "one" }) })
    producer.middleware.append do |message|
      message[:headers] = message[:headers].merge("step" => "#{message[:headers]["step"]},two")
      message
    end
    report = producer.produce_sync(topic: topic, payload: "mw")
    expect(consume_reports([report]).first[:headers]).to eq([%w[step one,two]])
  end

  it "runs prepended steps first" do
    order = []
    producer.middleware.append(->(message) { (order << :appended) && message })
    producer.middleware.prepend(->(message) { (order << :prepended) && message })
    producer.produce_sync(topic: topic, payload: "order")
    expect(order).to eq(%i[prepended appended])
  end

  it "runs before validation: a step can complete a message, or break one" do
    producer.middleware.append(->(message) { { topic: topic }.merge(message) })
    expect(producer.produce_sync(payload: "no topic given").topic).to eq(topic)

    other = build_producer
    other.middleware.append(->(message) { message.merge(payload: 42) })
    expect { other.produce_async(topic: topic, payload: "fine") }.to raise_error(Sluice::Errors::MessageInvalidError, /payload/)
  end

  it "runs on every message of a batch, sync and async" do
    producer.middleware.append(->(message) { message.merge(key: "k-#{message[:payload]}") })
    batch = Array.new(3) { |i| { topic: topic, payload: i.to_s } }
    reports = producer.produce_many_sync(batch) + producer.produce_many_async(batch).map(&:wait)
    expect(consume_reports(reports).map { |m| m[:key] }).to eq(%w[k-0 k-1 k-2 k-0 k-1 k-2])
  end

  it "runs once on a buffered message: when it is buffered, not again when flushed" do
    calls = 0
    producer.middleware.append(->(message) { (calls += 1) && message.merge(headers: { "b" => "1" }) })
    producer.buffer(topic: topic, payload: "buffered")
    producer.buffer_many([{ topic: topic, payload: "buffered too" }])
    reports = producer.flush_sync
    expect(calls).to eq(2)
    expect(consume_reports(reports).map { |m| m[:headers] }).to eq([[%w[b 1]], [%w[b 1]]])
  end

  it "refuses a step that cannot be called" do
    expect { producer.middleware.append(:nope) }.to raise_error(ArgumentError, /respond to #call/)
  end
end
