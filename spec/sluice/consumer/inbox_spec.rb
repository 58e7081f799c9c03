# frozen_string_literal: true

# Consumer::Inbox without a broker, over a fake native consumer: its queue is a list of drains (messages and
# control items as Native::Consumer#consume returns them), its wake-up pipe a real pipe. What it promises:
# messages handed out in order, a rebalance answered before anything after it, what a revoke gives up never
# handed out, offsets stored only once processed and before the next drain, what was lent and not finished
# handed out again, errors reported or raised with what happened, and a wait that ends on stop or its timeout.
# (spec/integration/consumer/interrupted_reads_spec.rb breaks into all this against a broker.)
RSpec.describe Sluice::Consumer::Inbox do
  subject(:inbox) do
    described_class.new(client: native, rebalancer: rebalancer, instrument: ->(*event) { events << event },
                        keepalive_ms: 60_000, seek_timeout_ms: 1_000, refused: -> { refusal })
  end

  let(:pipe) { IO.pipe }
  let(:log) { [] } # what the native consumer was asked, in order
  let(:events) { [] }
  let(:refusal) { nil }
  let(:native) do
    reader, writer = pipe
    log = self.log
    Struct.new(:drains) do
      define_method(:message_fd) { reader.fileno }
      define_method(:wake_messages) { writer.write_nonblock("x", exception: false) && nil }
      define_method(:consume) { |max_items, _budget| (log << [:consume, max_items]) && (drains.shift || []) }
      define_method(:store_offsets) { |messages, count| (log << [:store_offsets, messages.map(&:offset), count]) && nil }
      define_method(:seek) { |positions, _timeout| (log << [:seek, positions]) && nil }
      def consume_exhausted? = false
      def progress = 0
    end.new([])
  end
  # Answers a rebalance as Rebalancer#call does: the partitions given up (all of a revoke's).
  let(:rebalancer) do
    log = self.log
    lambda do |kind, partitions, _protocol, _code, commit_within:|
      log << [kind, commit_within]
      kind == :revoke ? partitions.map { |topic, partition| [topic, partition] } : []
    end
  end

  after { pipe.each(&:close) }

  def message(partition, offset) = Sluice::Message.new("t", partition, offset, nil, "p#{offset}", 0, nil)
  def rebalance(kind, *partitions) = [:rebalance, kind, partitions.map { |partition| ["t", partition, -1001, 0] }, "COOPERATIVE", 0]
  def consumed = log.select { |entry| entry.first == :consume }

  it "hands out what one drain brought, in order, before draining again" do
    native.drains << [message(0, 1), message(0, 2), message(1, 7)]

    expect(Array.new(3) { inbox.take(0)&.offset }).to eq([1, 2, 7])
    expect(consumed.size).to eq(1)
  end

  it "gives nil when nothing came within the timeout" do
    expect(expect_within(at_least: 0.03, guards: "returning before the 30 ms timeout") { inbox.take(30) }).to be_nil
  end

  it "answers a rebalance before it hands out anything drained after it" do
    native.drains << [message(0, 1), rebalance(:assign, 1), message(1, 5)]

    inbox.take(0)
    expect(log.map(&:first)).to eq([:consume])
    expect(inbox.take(0).offset).to eq(5)
    expect(log.map(&:first)).to eq(%i[consume assign])
  end

  it "never hands out what a revoke gave up, lent in the batch being filled or not" do
    native.drains << [message(0, 1), message(1, 2), rebalance(:revoke, 0), message(0, 3), message(1, 4)]

    expect(inbox.take_batch(10, 0).map(&:offset)).to eq([2, 4])
  end

  it "stores a processed message's offset before the next drain, and nothing that was not processed" do
    native.drains << [message(0, 1), message(0, 2)]
    first = inbox.take(0)
    inbox.take(0) # lent, not processed
    inbox.processed(first)
    inbox.take(0)

    expect(log).to eq([[:consume, described_class::DRAIN_ITEMS], [:store_offsets, [1], 1], [:consume, described_class::DRAIN_ITEMS]])
  end

  it "stores what was processed before a revoke is answered, so the commit before it includes it" do
    native.drains << [message(0, 1), rebalance(:revoke, 0)]
    inbox.processed(inbox.take(0))
    inbox.take(0)

    expect(log.map(&:first)).to eq(%i[consume store_offsets revoke consume])
  end

  # Issue 59: one direction. The reader asks the Inbox; the Inbox reaches a concurrent read only through the
  # Holder that read hands #reading, and only around a rebalance: never constructed with it, never given it.
  describe "its readers" do
    it "are not the Inbox's to know: no reader, workers or parallel block among its arguments or methods" do
      known = described_class.instance_method(:initialize).parameters.map(&:last) + described_class.public_instance_methods(false)

      expect(known).not_to include(:workers, :workers=, :in_parallel_block?, :concurrent?, :close_began, :refuse_past_unfinished)
    end

    it "reach it through the read's Holder alone: told before a revoke and after it, in that read only" do
      native.drains << [message(0, 1), rebalance(:revoke, 0), message(1, 2)]
      log = self.log
      holder = Object.new.tap do |told| # a strict fake: any other call raises NoMethodError
        told.define_singleton_method(:before_revoke) { log << [:before_revoke] }
        told.define_singleton_method(:after_rebalance) { |given_up| log << [:after_rebalance, given_up] }
      end

      expect(inbox.reading(holder) { [inbox.take(0), inbox.take(0)].map(&:offset) }).to eq([1, 2])
      expect(log.map(&:first)).to eq(%i[consume before_revoke revoke after_rebalance])
      expect(log.assoc(:after_rebalance)).to eq([:after_rebalance, [["t", 0]]])
      native.drains << [rebalance(:revoke, 1)]
      inbox.reading { inbox.take(0) } # another read: its own Holder (none), not the last one's
      expect(log.count { |entry| entry.first == :before_revoke }).to eq(1)
    end
  end

  it "hands out again, first, what a read left lent and unfinished when the next read begins" do
    native.drains << [message(0, 1), message(0, 2)]
    inbox.reading { inbox.take(0) } # interrupted before the application finished it

    expect(inbox.reading { inbox.take(0).offset }).to eq(1)
  end

  it "rewinds unfinished messages: each partition sought back to its first, and no longer lent" do
    native.drains << [message(0, 4), message(0, 5), message(1, 9)]
    lent = Array.new(3) { inbox.take(0) }

    expect(inbox.rewind(lent)).to be_nil
    expect(log.last).to eq([:seek, [["t", 0, 4], ["t", 1, 9]]])
    expect(inbox.lease).to eq([])
  end

  it "reports a consumer error and goes on handing out messages" do
    native.drains << [[:error, Sluice::KafkaError.number_for(:transport), "connection reset", false], message(0, 1)]

    expect(inbox.take(0).offset).to eq(1)
    expect(events).to contain_exactly(["error.occurred", { type: "consumer.error", error: have_attributes(code: :transport) }])
  end

  it "reports the end of a partition" do
    native.drains << [[:eof, "t", 0, 42]]
    inbox.take(0)

    expect(events).to eq([["consumer.partition_eof", { topic: "t", partition: 0, offset: 42 }]])
  end

  it "raises GroupProtocolUnsupportedError, once, when the coordinator lacks KIP-848's heartbeat" do
    unsupported = [:error, Sluice::KafkaError.number_for(:unsupported_feature), "ConsumerGroupHeartbeatRequest not supported by broker", false]
    native.drains << [unsupported]

    expect { inbox.take(0) }.to raise_error(Sluice::Errors::GroupProtocolUnsupportedError)
    expect(inbox.take(0)).to be_nil
  end

  context "when the brokers refuse the consumer's credentials" do
    let(:refusal) { Sluice::KafkaError.new(Sluice::KafkaError.number_for(:authentication), "SASL authentication failed") }

    it "raises AuthenticationError instead of waiting, once nothing is left to hand out" do
      native.drains << [message(0, 1)]

      expect(inbox.take(10_000).offset).to eq(1)
      expect { inbox.take(10_000) }.to raise_error(Sluice::Errors::AuthenticationError) { |error| expect(error.kafka_error).to eq(refusal) }
    end
  end

  it "ends a waiting read when stopped from another thread" do
    reader = Thread.new { inbox.reading { inbox.take(nil) } }
    deadline = Sluice::Shared::Clock.now + 5
    Thread.pass until reader.status == "sleep" || !reader.alive? || Sluice::Shared::Clock.now > deadline
    inbox.stop

    expect(reader.join(5)).to be(reader) # ended, not still waiting
    expect(reader.value).to be_nil
  end

  # Thread.handle_interrupt is no fence against Fiber#raise (Async's
  # Task#stop): a stop lands in any wait of a masked move.
  context "when an Async task reading is stopped in a wait", :async do
    let(:hold) { Queue.new } # never fed: the wait the stop lands in

    # Runs the read in a task and stops it once it waits (waiting has an item).
    def stop_in_wait(waiting, holder = nil, &read)
      Async do
        reader = Async { inbox.reading(holder, &read) }
        waiting.pop
        reader.stop
      end.wait
    end

    it "answers a revocation stopped in the wait for running blocks on the next read, before anything after it" do
      waiting = Queue.new
      first = true
      hold = self.hold
      holder = Object.new.tap do |blocks|
        blocks.define_singleton_method(:before_revoke) do # the first wait is stopped, the next finds no block running
          next unless first

          first = false
          waiting << true
          hold.pop
        end
        blocks.define_singleton_method(:after_rebalance) { |_given_up| nil }
      end
      native.drains << [rebalance(:revoke, 0), message(1, 5)]
      stop_in_wait(waiting, holder) { inbox.take(0) }

      expect(inbox.reading { inbox.take(0) }.offset).to eq(5)
      expect(log.map(&:first)).to eq(%i[consume revoke])
    end

    it "drops nothing a seek back stopped in its wait did not seek back" do
      waiting = Queue.new
      hold = self.hold
      native.define_singleton_method(:seek) { |_positions, _timeout| (waiting << true) && hold.pop }
      native.drains << [message(0, 4), message(0, 5)]
      stop_in_wait(waiting) { inbox.take(0) && inbox.give_back([["t", 0, nil]]) }

      expect(Array.new(3) { inbox.reading { inbox.take(0)&.tap { |message| inbox.processed(message) }&.offset } }).to eq([4, 5, nil])
    end
  end

  # Issue 55: a reader thread started just before stop (30 members under KIP-848, assigned within
  # milliseconds), or a TERM trapped before the loop began, was forgotten: the read began afresh, for ever.
  it "ends at once the next read when stopped while none ran, and only that one" do
    native.drains << [message(0, 1)]
    inbox.stop

    reader = Thread.new { inbox.reading { inbox.take(nil) } }
    expect(reader.join(5)).to be(reader) # ended, not waiting for ever
    expect(reader.value).to be_nil
    expect(inbox.reading { inbox.take(0)&.offset }).to eq(1) # the stop was spent
  end

  it "ends at once the next poll when stopped while none ran, and only that one" do
    native.drains << [message(0, 1)]
    inbox.stop

    expect(expect_within(1, guards: "a stop before poll forgotten (its 5 s timeout)") { inbox.poll(5_000, false) }).to be_nil
    expect(inbox.poll(0, false) && inbox.lease.last.offset).to eq(1)
  end

  it "leaves the slot and a stop made inside a read to that read when a nested read returns" do
    native.drains << [message(0, 1), message(0, 2)]

    taken = inbox.reading do
      first = inbox.take(nil)
      inbox.processed(first)
      inbox.stop
      inbox.poll(0, false) # poll inside each_message's block
      [first.offset, inbox.reading?, inbox.take(nil)]
    end
    expect(taken).to eq([1, true, nil]) # still read by the outer read (another thread's claim is refused)
    expect(inbox.reading { inbox.take(0)&.offset }).to eq(2) # spent by the outer read
  end

  it "refuses a second reader while one reads, naming the problem" do
    inside = Queue.new
    leave = Queue.new
    reader = Thread.new { inbox.reading { inside << true && leave.pop } }
    inside.pop

    expect { inbox.reading { nil } }.to raise_error(Sluice::Errors::ConsumerStateError, /already being read by another thread or fiber/)
    leave << true
    reader.join
    expect(inbox.reading { :mine }).to eq(:mine)
  end
end
