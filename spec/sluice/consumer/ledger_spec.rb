# frozen_string_literal: true

# Consumer::Ledger: the hand-off invariant as a pure object. Every example
# checks the two halves of it on what the application saw: an offset stored
# never passes a message not finished (safe), and a message drained is
# finished, still in the ledger, or given back to be read again (nothing
# skipped).
RSpec.describe Sluice::Consumer::Ledger do
  subject(:ledger) { described_class.new }

  def message(offset, partition: 0, topic: "t") = Sluice::Message.new(topic, partition, offset, nil, "m#{offset}", 0, nil)

  def drained(offsets, partition: 0) = offsets.map { |offset| message(offset, partition: partition) }

  # Stored offsets per partition, as Native::Consumer#store_offsets keeps them: each call stores, for
  # each partition, the offset after its highest message (storable! does not sort them).
  def store(stored, messages)
    messages.group_by { |m| [m.topic, m.partition] }.each { |key, list| stored[key] = list.map(&:offset).max + 1 }
    stored
  end

  def lend_all = Array.new(ledger.buffered_size) { ledger.lend }

  it "lends buffered messages in order and stores each offset once finished" do
    ledger.fill(drained(0..2))
    first = ledger.lend
    second = ledger.lend
    expect(ledger.lent).to eq([first, second])
    expect(ledger.finish(first)).to be(true)
    expect(ledger.storable!.map(&:offset)).to eq([0])
    expect(ledger.lent).to eq([second])
    expect(ledger.buffered_size).to eq(1)
  end

  it "passes control items without lending them" do
    ledger.fill([[:rebalance], message(0)])
    expect(ledger.peek).to eq([:rebalance])
    ledger.pass
    expect(ledger.lend.offset).to eq(0)
    expect(ledger.buffered?).to be(false)
  end

  describe "out-of-order completion" do
    it "holds a finished offset back while a lower one of its partition is lent" do
      ledger.fill(drained(0..3))
      m0, m1, m2, m3 = lend_all
      ledger.finish(m2)
      ledger.finish(m3)
      expect(ledger.storable!).to be_empty
      ledger.finish(m1)
      expect(ledger.storable!).to be_empty
      ledger.finish(m0)
      expect(ledger.storable!.map(&:offset)).to contain_exactly(0, 1, 2, 3)
    end

    it "lets a partition's offsets go while another partition's lower offset is lent" do
      ledger.fill(drained([5], partition: 0) + drained([0], partition: 1))
      slow, fast = lend_all
      ledger.finish(fast)
      expect(ledger.storable!).to eq([fast])
      expect(ledger.lent).to eq([slow])
    end

    it "hands out ready offsets in the order finished: what is stored is the highest" do
      ledger.fill(drained(0..4))
      messages = lend_all
      [3, 1, 4, 2].each { |i| ledger.finish(messages[i]) }
      ledger.finish(messages[0])
      ready = ledger.storable!
      expect(ready.map(&:offset)).to eq([3, 1, 4, 2, 0])
      expect(store({}, ready)).to eq(["t", 0] => 5)
    end

    it "never stores past an unfinished message, whatever order 200 random completions come in" do
      random = Random.new(RSpec.configuration.seed)
      50.times do
        ledger = described_class.new
        stored = {}
        finished = {}
        ledger.fill(Array.new(3) { |p| drained(0...20, partition: p) }.flatten.shuffle(random: random).sort_by(&:offset))
        lent = Array.new(60) { ledger.lend }
        lent.shuffle(random: random).each do |m|
          ledger.finish(m)
          finished[[m.partition, m.offset]] = true
          store(stored, ledger.storable!)
          stored.each do |(_, partition), offset|
            expect((0...offset).all? { |o| finished[[partition, o]] }).to be(true)
          end
        end
        expect(stored.values).to eq([20, 20, 20])
      end
    end
  end

  describe "a revocation mid-flight" do
    it "forgets what is lent and done on the revoked partitions; a late finish there stores nothing" do
      ledger.fill(drained(0..2, partition: 0) + drained(0..1, partition: 1))
      p0a, p0b, = lend_all
      ledger.finish(p0b) # held back by p0a
      firsts = ledger.drop([["t", 0]], lent: true)
      expect(firsts).to eq({})
      expect(ledger.lent.map(&:partition)).to eq([1, 1])
      expect(ledger.finish(p0a)).to be(false)
      expect(ledger.storable!).to be_empty
    end

    it "drops what is buffered on the revoked partitions and says where each began" do
      ledger.fill(drained(0..3, partition: 0) + drained(0..1, partition: 1))
      ledger.lend
      expect(ledger.drop([["t", 0]], lent: true)).to eq(["t", 0] => 1)
      expect(lend_all.map { |m| [m.partition, m.offset] }).to eq([[1, 0], [1, 1]])
    end
  end

  # A partition assigned with no commit has no start of its own until a message finishes there (issue 55).
  describe "a newly assigned partition's start" do
    it "is its first message drained, once per assignment, whatever is drained or finished later" do
      ledger.assigned([["t", 0], ["t", 1]])
      ledger.drained([["t", 0, 5], ["t", 1, 8]])
      expect(ledger.starts!).to eq([["t", 0, 5, nil], ["t", 1, 8, nil]])
      expect(ledger.awaiting_starts?).to be(false)
      ledger.drained([["t", 0, 7]])
      expect(ledger.starts!).to eq([])
    end

    it "waits for a partition's first message; a revoked partition's is forgotten" do
      ledger.assigned([["t", 0], ["t", 1], ["t", 2]])
      ledger.drained([["t", 0, 3]])
      ledger.drop([["t", 1]], lent: true)
      expect(ledger.awaiting_starts?).to be(true)
      ledger.drained([["t", 1, 0], ["t", 2, 7]])
      expect(ledger.starts!).to eq([["t", 0, 3, nil], ["t", 2, 7, nil]])
    end

    it "is the base of what finishes above it while nothing lower finished (the offset's metadata)" do
      ledger.tracking = true
      ledger.assigned([["t", 0]])
      ledger.fill(drained(4..6))
      ledger.drained([["t", 0, 4]])
      ledger.starts!
      _m4, m5, = lend_all
      ledger.finish(m5)
      held = ledger.finished_above(ledger.storable!)
      expect(held.map { |topic, partition, base, metadata| [topic, partition, base, Sluice::Consumer::FinishedOffsets.decode(metadata, base)] })
        .to eq([["t", 0, 4, [5]]])
    end
  end

  # Consumer#assign replaces the assignment: every partition a message is held of goes.
  describe "the partitions held (an assign drops them all)" do
    it "names each partition with a message buffered, lent, handed or done, and none with only control items" do
      ledger.fill([*drained(0..1, partition: 0), [:eof, "t", 0, 2], *drained(0..1, partition: 1), *drained(0..0, partition: 2)])
      p0a = ledger.lend
      p0b = ledger.lend
      ledger.finish(p0b) # done, held back by p0a
      ledger.pass
      ledger.handed << ledger.lend # poll(store: true)'s hand-over of partition 1's first
      expect(ledger.partitions).to contain_exactly(["t", 0], ["t", 1], ["t", 2])
      ledger.drop(ledger.partitions, lent: true)
      expect([ledger.partitions, ledger.buffered?, ledger.lent, ledger.handed]).to eq([[], false, [], []])
      expect(ledger.finish(p0a)).to be(false)
      expect(ledger.storable!).to be_empty
    end
  end

  # poll(store: true): Native::Handoff#poll moves the message from lent to
  # handed (push, then pop); the next read finishes it.
  describe "a message poll(store: true) handed" do
    def hand(ledger)
      message = ledger.lend
      ledger.handed << message
      ledger.lent.pop
      message
    end

    it "is done, and its offset storable, only once the application reads again" do
      ledger.fill(drained(0..1))
      m0 = hand(ledger)
      expect(ledger.storable!).to be_empty
      ledger.finish_handed
      expect(ledger.handed).to be_empty
      expect(ledger.storable!).to eq([m0])
    end

    it "holds back what is done above it in its partition (a read nested inside each_message's block)" do
      ledger.fill(drained(0..1, partition: 0) + drained(0..0, partition: 1))
      m0 = hand(ledger)
      m1 = ledger.lend
      other = ledger.lend
      ledger.finish(m1)
      ledger.finish(other)
      expect(ledger.storable!).to eq([other])
      ledger.finish_handed
      expect(store({}, ledger.storable!)).to eq(["t", 0] => 2)
      expect(m0.offset).to eq(0)
    end

    it "stays the application's when a read begins: it is not put back in the buffer" do
      ledger.fill(drained(0..2))
      m0 = hand(ledger)
      ledger.lend # lent, not handed: an interrupt before the hand-off
      ledger.return_lent
      expect(ledger.handed).to eq([m0])
      expect(lend_all.map(&:offset)).to eq([1, 2])
    end

    it "is forgotten when its partition is revoked: a late read stores nothing for it" do
      ledger.fill(drained(0..1, partition: 0) + drained(0..0, partition: 1))
      hand(ledger)
      ledger.drop([["t", 0]], lent: true)
      expect(ledger.handed).to be_empty
      ledger.finish_handed
      expect(ledger.storable!).to be_empty
    end

    it "the plain lease has no handed place; the storing lease is the ledger's own Arrays" do
      expect(ledger.plain_lease).to eq([ledger.lent, nil]).and be_frozen
      expect(ledger.storing_lease[0]).to be(ledger.lent)
      expect(ledger.storing_lease[1]).to be(ledger.handed)
    end
  end

  describe "a seek" do
    it "drops the partition's buffered messages but keeps what is lent (it finishes)" do
      ledger.fill(drained(0..3))
      lent = ledger.lend
      expect(ledger.drop([["t", 0]])).to eq(["t", 0] => 1)
      ledger.finish(lent)
      expect(ledger.storable!).to eq([lent])
    end

    it "rewound: what is done above the rewound messages is forgotten, so it is not stored past them" do
      ledger.fill(drained(0..3))
      m0, m1, m2, m3 = lend_all
      ledger.finish(m2)
      expect(ledger.rewound([m1, m3])).to eq([["t", 0, 1]])
      expect(ledger.lent).to eq([m0])
      ledger.finish(m0)
      expect(ledger.storable!).to eq([m0])
      expect(ledger.done?).to be(false)
    end
  end

  describe "a read that ends early (an interrupt, a stop)" do
    it "puts what is lent back at the front of the buffer, in order" do
      ledger.fill(drained(0..3))
      lend_all.first(2) # 0..3 lent
      ledger.return_lent
      expect(ledger.lent).to be_empty
      expect(lend_all.map(&:offset)).to eq([0, 1, 2, 3])
    end

    it "forgets what is done above a returned message: the buffer holds it back now" do
      ledger.fill(drained(0..2))
      m0, m1, m2 = lend_all
      ledger.finish(m1)
      ledger.return_lent
      expect(ledger.storable!).to be_empty
      again = lend_all
      expect(again).to eq([m0, m2])
      again.each { |m| ledger.finish(m) }
      expect(ledger.storable!.map(&:offset)).to eq([0, 2])
    end

    it "hands a message lent and not yet out of the buffer out once, not twice" do
      m0, m1 = drained(0..1)
      ledger.fill([m0, m1])
      ledger.lent << m0 # lend's first step only: an interrupt before the buffer moved on
      ledger.return_lent
      expect(lend_all).to eq([m0, m1])
    end
  end

  # An interrupt may land after any step of #lend and #finish (the two moves
  # made without a mask): raised after each C call they make, the state left
  # behind must still skip nothing and store nothing unfinished.
  describe "an interrupt between any two steps of lend and finish" do
    let(:interrupt) { Class.new(StandardError) }

    # Runs the block with an interrupt raised at its nth C return. @return [Boolean] it was raised
    def interrupting_after(nth, &block)
      count = 0
      trace = TracePoint.new(:c_return) { raise interrupt if (count += 1) == nth }
      trace.enable(target_thread: Thread.current, &block)
      false
    rescue interrupt
      true
    end

    # Reads everything left after the interrupt the way the next read would.
    def finish_reading(ledger, finished, stored)
      ledger.return_lent
      Array.new(ledger.buffered_size) { ledger.lend }.each do |m|
        ledger.finish(m)
        finished[m.offset] = true
      end
      store(stored, ledger.storable!)
    end

    it "lend: nothing skipped, wherever it is interrupted" do
      steps = 0
      (1..).each do |nth|
        ledger = described_class.new
        ledger.fill(drained(0..2))
        break unless interrupting_after(nth) { ledger.lend }

        steps += 1
        finished = {}
        stored = {}
        finish_reading(ledger, finished, stored)
        expect(finished.keys.sort).to eq([0, 1, 2])
        expect(stored).to eq(["t", 0] => 3)
      end
      expect(steps).to be >= 2
    end

    it "finish_handed: stored once at most too far, never skipped, wherever it is interrupted" do
      steps = 0
      (1..).each do |nth|
        ledger = described_class.new
        ledger.fill(drained(0..1))
        ledger.handed << ledger.lend
        ledger.lent.pop
        break unless interrupting_after(nth) { ledger.finish_handed }

        steps += 1
        ledger.finish_handed # the next read
        finished = { 0 => true }
        stored = store({}, ledger.storable!)
        expect(stored).to eq(["t", 0] => 1)
        finish_reading(ledger, finished, stored)
        expect(stored).to eq(["t", 0] => 2)
      end
      expect(steps).to be >= 1
    end

    it "finish out of order: nothing stored unfinished, nothing skipped, wherever it is interrupted" do
      steps = 0
      (1..).each do |nth|
        ledger = described_class.new
        ledger.fill(drained(0..2))
        m0, m1, = Array.new(3) { ledger.lend }
        finished = { 1 => true } # m1's block returned; the interrupt lands in its bookkeeping
        stored = {}
        break unless interrupting_after(nth) { ledger.finish(m1) }

        steps += 1
        store(stored, ledger.storable!)
        expect(stored).to be_empty # m0 is still lent
        ledger.finish(m0)
        finished[0] = true
        store(stored, ledger.storable!)
        expect(stored.fetch(["t", 0])).to be_between(1, 2) # never past m2, still lent
        finish_reading(ledger, finished, stored)
        expect(finished.keys.sort).to eq([0, 1, 2])
        expect(stored).to eq(["t", 0] => 3)
      end
      expect(steps).to be >= 2
    end
  end

  describe "what finished above a held message (the offset's metadata)" do
    let(:codec) { Sluice::Consumer::FinishedOffsets }

    before { ledger.tracking = true }

    it "names the finished offsets above the lowest unfinished one, relative to the offset stored" do
      ledger.fill(drained(0..5))
      m0, m1, m2, m3, m4, m5 = lend_all
      [m0, m3, m5].each { |m| ledger.finish(m) }
      ready = ledger.storable!
      expect(ready.map(&:offset)).to eq([0])
      held = ledger.finished_above(ready)
      expect(held.map { |topic, partition, base, _| [topic, partition, base] }).to eq([["t", 0, 1]])
      expect(codec.decode(held.first.last, 1)).to eq([3, 5])
      [m1, m2, m4].each { |m| ledger.finish(m) }
      expect(ledger.finished_above(ledger.storable!)).to eq([])
    end

    it "stores nothing more while no offset of the partition is known (nothing stored, nothing committed)" do
      ledger.fill(drained(0..2))
      _m0, m1, = lend_all
      ledger.finish(m1)
      expect(ledger.finished_above(ledger.storable!)).to eq([])
    end

    it "skips what an earlier member finished: done as drained, never lent, stored in turn" do
      ledger.skip("t", 0, 10, [11, 13])
      ledger.fill(drained(10..14))
      lent = lend_all
      expect(lent.map(&:offset)).to eq([10, 12, 14])
      ledger.finish(lent[0])
      expect(ledger.storable!.map(&:offset)).to contain_exactly(10, 11)
      ledger.finish(lent[1])
      ledger.finish(lent[2])
      expect(ledger.storable!.map(&:offset)).to contain_exactly(12, 13, 14)
    end

    it "keeps a skipped offset back while a lower message is still buffered" do
      ledger.skip("t", 0, 10, [12])
      ledger.fill(drained(10..13))
      expect(ledger.storable!).to eq([])
      expect(ledger.finished_above([]).map { |_, _, base, metadata| codec.decode(metadata, base) }).to eq([[12]])
      expect(ledger.lend.offset).to eq(10)
    end

    it "stores nothing past an unfinished message a seek went back to" do
      ledger.fill(drained(0..2))
      m0, m1, m2 = lend_all
      ledger.finish(m0)
      ledger.finish(m1)
      ledger.finished_above(ledger.storable!) # base 2
      ledger.rewound([m2])
      ledger.fill(drained(1..3))
      _r1, _r2, r3 = lend_all
      ledger.finish(r3) # 1 unfinished: offset 2 (stored before) would pass it
      expect(ledger.finished_above(ledger.storable!)).to eq([])
    end

    it "skips each offset once, and forgets a revoked partition's" do
      ledger.skip("t", 0, 0, [1])
      ledger.skip("t", 1, 0, [1])
      ledger.drop([["t", 1]], lent: true)
      ledger.fill(drained(0..1) + drained(0..1, partition: 1))
      expect(lend_all.map { |m| [m.partition, m.offset] }).to eq([[0, 0], [1, 0], [1, 1]])
      ledger.fill(drained(1..1))
      expect(ledger.lend.offset).to eq(1)
    end
  end
end
