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

  it "keeps each token with its time through interleaved pushes and pops" do
    rng = Random.new(44)
    500.times { |token| schedule.push(rng.rand(100.0), token) }
    expected = {}
    (1..20).each do |step|
      schedule.pop_until(step * 5.0) do |at, token|
        expect(at).to be <= step * 5.0
        expected[token] = at + 100.0
        schedule.push(at + 100.0, token)
      end
    end
    seen = {}
    schedule.pop_until(1_000.0) { |at, token| seen[token] = at }
    expect(seen).to eq(expected)
  end

  # An idle client's periodic poll goes through here every interval: with
  # 1,000 of them, a few arrays per entry made the poller thread run the GC.
  it "re-schedules without allocating per entry" do
    1_000.times { |token| schedule.push(token / 1_000.0, token) }
    schedule.pop_until(2.0) { |at, token| schedule.push(at + 1.0, token) } # warm: the arrays have their capacity
    before = GC.stat(:total_allocated_objects)
    schedule.pop_until(3.0) { |at, token| schedule.push(at + 1.0, token) }
    expect(GC.stat(:total_allocated_objects) - before).to be < 10
  end
end
