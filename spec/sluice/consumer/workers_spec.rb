# frozen_string_literal: true

# Consumer::Workers on threads, without a broker: how the reader is woken
# (issue 58, item 5). Synchronised on queues and on polled counters with a deadline.
RSpec.describe Sluice::Consumer::Workers do
  def message(offset) = Sluice::Message.new("t", 0, offset, "k#{offset}", "m#{offset}", 0, nil)

  # Polls the block (Thread.pass, no sleep) until it is true, at most seconds.
  def until_true(seconds, what)
    deadline = monotonic + seconds
    Thread.pass until yield || monotonic > deadline
    expect(yield).to be(true), "not within #{seconds} s: #{what}"
  end

  def start(count, messages)
    gates = Array.new(messages) { Queue.new }
    workers = described_class.new(count: count, ordering: :none, block: ->(m) { gates[m.offset].pop }, stopped: -> { false })
    messages.times { |i| workers.add(message(i)) }
    until_true(5, "every worker running") { workers.running == count }
    [workers, gates]
  end

  # A reader in #wait_for_finish; its value: how many ends it found.
  def waiting_reader(workers)
    reader = Thread.new do
      workers.wait_for_finish(30)
      workers.finished!.size
    end
    until_true(5, "the reader waiting") { reader.status == "sleep" }
    reader
  end

  it "wakes a reader waiting for room once a batch of blocks ended, or a worker has nothing to start; not on each end" do
    count = 32 # a batch: count / WAKE_BATCH_SHARE = 2 ends
    workers, gates = start(count, count + 2)
    reader = waiting_reader(workers)
    gates[0] << :go # its worker starts message 32 itself: all stay busy
    until_true(5, "the first end") { workers.size == count + 1 }
    expect(reader.join(0.3)).to be_nil, "the reader was woken for one end"
    gates[1] << :go
    expect(expect_within(5, guards: "the reader's 30 s wait") { reader.value }).to eq(2)

    reader = waiting_reader(workers) # 32 running, 0 waiting
    gates[2] << :go # its worker is left idle: the reader is woken for one end
    expect(expect_within(5, guards: "the reader's 30 s wait") { reader.value }).to eq(1)
  ensure
    gates&.each { |gate| gate << :go }
    workers&.stop
  end
end
