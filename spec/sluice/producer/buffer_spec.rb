# frozen_string_literal: true

# Producer::Buffer alone: what a flush takes and gives back, under threads.
RSpec.describe Sluice::Producer::Buffer do
  subject(:buffer) { described_class.new }

  it "hands a flush exactly what was buffered before it, and empties" do
    expect(buffer.push(1)).to eq(1)
    expect(buffer.concat([2, 3])).to eq(3)
    expect(buffer.take).to eq([1, 2, 3])
    expect(buffer).to be_empty
    expect(buffer.take).to eq([])
  end

  it "puts what a flush gives back in front of what was buffered meanwhile, in order" do
    buffer.concat([1, 2, 3])
    taken = buffer.take
    buffer.push(4)
    buffer.restore(taken.drop(1))
    expect(buffer.messages).to eq([2, 3, 4])
    buffer.restore([])
    expect(buffer.size).to eq(3)
  end

  it "gives a copy: changing it changes nothing buffered" do
    buffer.push(1)
    buffer.messages << 2
    expect(buffer.messages).to eq([1])
  end

  it "loses and repeats nothing when threads buffer and take at once" do
    takers_done = false
    taken = Queue.new
    taker = Thread.new do
      until takers_done && buffer.empty?
        buffer.take.each { |item| taken << item }
        Thread.pass
      end
    end
    Array.new(4) { |t| Thread.new { 1_000.times { |i| buffer.push([t, i]) } } }.each(&:join)
    takers_done = true
    taker.join
    items = Array.new(taken.size) { taken.pop }
    expect(items.size).to eq(4_000)
    expect(items.uniq.size).to eq(4_000)
    4.times { |t| expect(items.select { |thread, _| thread == t }.map(&:last)).to eq((0...1_000).to_a) }
  end
end
