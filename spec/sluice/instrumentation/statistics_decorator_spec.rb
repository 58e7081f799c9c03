# frozen_string_literal: true

RSpec.describe Sluice::Instrumentation::StatisticsDecorator do
  subject(:decorator) { described_class.new }

  it "adds a _d key of 0 next to every number the first time, at every depth" do
    stats = decorator.call({ "txmsgs" => 5, "name" => "p", "brokers" => { "b1" => { "tx" => 2, "rtt" => { "avg" => 1.5 } } } })
    expect(stats).to eq("txmsgs" => 5, "txmsgs_d" => 0, "name" => "p",
                        "brokers" => { "b1" => { "tx" => 2, "tx_d" => 0, "rtt" => { "avg" => 1.5, "avg_d" => 0 } } })
  end

  it "then adds how much each number changed since the previous emission" do
    decorator.call({ "txmsgs" => 5, "brokers" => { "b1" => { "tx" => 2, "rtt" => { "avg" => 1.5 } } } })
    stats = decorator.call({ "txmsgs" => 12, "brokers" => { "b1" => { "tx" => 2, "rtt" => { "avg" => 1.0 } } } })
    expect(stats["txmsgs_d"]).to eq(7)
    expect(stats.dig("brokers", "b1", "tx_d")).to eq(0)
    expect(stats.dig("brokers", "b1", "rtt", "avg_d")).to eq(-0.5)
  end

  it "gives 0 for a number that is new, and leaves strings and arrays alone" do
    decorator.call({ "a" => 1 })
    stats = decorator.call({ "a" => 2, "brokers" => { "b2" => { "tx" => 9 } }, "s" => "x", "l" => [1] })
    expect(stats).to eq("a" => 2, "a_d" => 1, "brokers" => { "b2" => { "tx" => 9, "tx_d" => 0 } }, "s" => "x", "l" => [1])
  end
end
