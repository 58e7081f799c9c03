# frozen_string_literal: true

RSpec.describe "Producing to a real broker", :kafka do
  let(:producer) { build_producer }
  let(:topic) { "sluice-spec-3p" }

  it "delivers a message with key, headers and timestamp and reads it back" do
    time = Time.at(1_700_000_000, 123, :millisecond)
    report = producer.produce_sync(topic: topic, payload: "hello", key: "k1", headers: { "a" => "1", "b" => %w[x y] },
                                   timestamp: time)

    expect(report).to have_attributes(topic: topic, error: nil)
    expect(report.offset).to be >= 0
    message = consume_reports([report]).first
    expect(message).to include(payload: "hello", key: "k1", timestamp: 1_700_000_000_123,
                               headers: [%w[a 1], %w[b x], %w[b y]])
  end
end
