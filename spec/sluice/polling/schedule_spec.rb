# frozen_string_literal: true

RSpec.describe Sluice::Polling::Schedule do
  subject(:schedule) { described_class.new }

  it "yields only the entries due by the horizon, earliest first, and keeps the rest" do
    [5.0, 1.0, 3.0, 2.0, 4.0].each_with_index { |at, token| schedule.push(at, token) }

    due = []
    schedule.pop_until(3.0) { |at, token| due << [at, token] }

    expect(due).to eq([[1.0, 1], [2.0, 3], [3.0, 2]])
    expect(schedule.first_at).to eq(4.0)
    expect(schedule.size).to eq(2)
  end

  it "does not yield again, in the same call, what the block pushes back" do
    schedule.push(1.0, :a)
    seen = []
    schedule.pop_until(10.0) do |at, token|
      seen << token
      schedule.push(at + 1, token)
    end

    expect(seen).to eq([:a])
    expect(schedule.first_at).to eq(2.0)
  end

  it "orders many entries" do
    times = Array.new(200) { |i| (i * 7919) % 200 }
    times.each { |at| schedule.push(at, at) }
    popped = []
    schedule.pop_until(1_000) { |at, _| popped << at }
    expect(popped).to eq(times.sort)
    expect(schedule).to be_empty
  end
end
