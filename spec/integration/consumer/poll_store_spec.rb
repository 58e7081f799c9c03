# frozen_string_literal: true

# poll(store: true): the message a poll returned is finished when the
# application reads again, and only then stored (Consumer::Inbox, "The hand-off
# invariant": handed, then done). Each example reads numbered messages of one
# partition from a known offset and looks at what the group has committed.
RSpec.describe "Consumer#poll(store: true)", :kafka do
  let(:topic) { "sluice-spec-poll-store" }
  let(:group) { "sluice-spec-poll-store-#{rand(1 << 30)}" }
  let(:producer) { build_producer }
  let(:injected) { Class.new(StandardError) }

  def build_consumer(group_id: group, **kafka, &block) = super(group_id: group_id, "enable.auto.commit": false, **kafka, &block)

  def produce(count) = Array.new(count) { |i| producer.produce_sync(topic: topic, partition: 0, payload: "m#{i}") }

  def committed(consumer) = consumer.committed.dig(topic, 0)

  # A poll that must return a message (the partition holds it): one call, so no
  # poll that returns nil finishes the message handed before it.
  def poll_one(consumer, **options) = consumer.poll(10_000, **options) || raise("no message within 10 s")

  # The group starts at offset: what its next member reads first.
  def start_group_at(offset)
    setup = build_consumer
    setup.assign(topic => [0])
    setup.commit(topic => { 0 => offset })
    setup.close
  end

  it "stores the offset of the message the poll before returned, not of the one it returns" do
    reports = produce(3)
    consumer = build_consumer
    consumer.assign(topic => { 0 => reports[0].offset })

    expect(poll_one(consumer, store: true).offset).to eq(reports[0].offset)
    consumer.commit
    expect(committed(consumer)).to eq(-1001) # the application has not come back from it

    expect(poll_one(consumer, store: true).offset).to eq(reports[1].offset)
    consumer.commit
    expect(committed(consumer)).to eq(reports[0].offset + 1)

    expect(poll_one(consumer, store: true).offset).to eq(reports[2].offset)
    expect(consumer.poll(200, store: true)).to be_nil # nothing more: the third is finished all the same
    consumer.commit
    expect(committed(consumer)).to eq(reports[2].offset + 1)
  end

  it "is what poll does without store: when config.poll_store is set; store: false still stores nothing" do
    reports = produce(3)
    consumer = build_consumer { |config| config.poll_store = true }
    consumer.assign(topic => { 0 => reports[0].offset })
    poll_one(consumer)
    expect(poll_one(consumer, store: false).offset).to eq(reports[1].offset)
    consumer.commit
    expect(committed(consumer)).to eq(reports[0].offset + 1)
    poll_one(consumer)
    consumer.commit
    expect(committed(consumer)).to eq(reports[0].offset + 1) # the second was polled with store: false
  end

  it "takes the message as finished at the next read of any kind, which stores nothing of its own" do
    reports = produce(2)
    consumer = build_consumer
    consumer.assign(topic => { 0 => reports[0].offset })
    poll_one(consumer, store: true)
    expect(poll_one(consumer).offset).to eq(reports[1].offset) # store: false: the application stores it, or not
    consumer.commit
    expect(committed(consumer)).to eq(reports[0].offset + 1)
  end

  # A revoke (close leaves the group) drops what is handed: its offset is not
  # ours to store, and the partition's next owner reads it. Auto commit: what
  # is stored is committed before the partition goes.
  { "close" => ->(consumer) { consumer.close },
    "unsubscribe, then close" => ->(consumer) { consumer.unsubscribe.then { consumer.close } } }.each do |how, leave|
    it "does not store the message it returned last when the group member leaves (#{how}): the next member reads it" do
      reports = produce(3)
      start_group_at(reports[0].offset)
      member = build_consumer("enable.auto.commit": true)
      member.subscribe(topic)
      expect(poll_one(member, store: true).offset).to eq(reports[0].offset)
      expect(poll_one(member, store: true).offset).to eq(reports[1].offset)
      leave.call(member)

      successor = build_consumer
      successor.subscribe(topic)
      expect(poll_one(successor).offset).to eq(reports[1].offset)
      expect(committed(successor)).to eq(reports[0].offset + 1)
    end
  end

  it "stores, after unsubscribe, the message the application came back from before its partition goes" do
    first = produce(1).first
    start_group_at(first.offset)
    member = build_consumer("enable.auto.commit": true)
    revoked = record_events(member.monitor, "consumer.partitions_revoked")
    member.subscribe(topic)
    poll_one(member, store: true)
    member.unsubscribe
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    # The first poll finishes the message; a poll answers the revoke (committing what is stored).
    expect(member.poll(100, store: true)).to be_nil while revoked.events.empty? && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    expect(revoked.events.size).to eq(1)
    member.close

    check = build_consumer
    check.assign(topic => [0])
    expect(committed(check)).to eq(first.offset + 1)
  end

  describe "interrupted" do
    # Raises injected into the poll after it lent its message, before that message is handed out.
    def interrupting_after_lending(&)
      trace = TracePoint.new(:return) do |tp|
        raise injected if tp.defined_class == Sluice::Consumer::Inbox && tp.method_id == :poll && tp.return_value
      end
      trace.enable(target_thread: Thread.current, &)
    end

    it "before it hands its message out: the message is handed out by the next poll, nothing after it is stored" do
      reports = produce(3)
      consumer = build_consumer
      consumer.assign(topic => { 0 => reports[0].offset })
      poll_one(consumer, store: true)
      expect { interrupting_after_lending { poll_one(consumer, store: true) } }.to raise_error(injected)
      consumer.commit
      expect(committed(consumer)).to eq(reports[0].offset + 1) # the application came back from the first

      expect(poll_one(consumer, store: true).offset).to eq(reports[1].offset) # lent, not handed: here again
      consumer.commit
      expect(committed(consumer)).to eq(reports[0].offset + 1)
      expect(poll_one(consumer, store: true).offset).to eq(reports[2].offset)
    end

    it "by Timeout while it waits: the message before is stored, the next one produced is handed out" do
      first = produce(1).first
      consumer = build_consumer
      consumer.assign(topic => { 0 => first.offset })
      poll_one(consumer, store: true)
      expect { Timeout.timeout(0.3) { consumer.poll(10_000, store: true) } }.to raise_error(Timeout::Error)
      consumer.commit
      expect(committed(consumer)).to eq(first.offset + 1)

      later = produce(1).first
      expect(poll_one(consumer, store: true).offset).to eq(later.offset)
    end

    it "by Thread#raise while it waits, from another thread: nothing is skipped" do
      first = produce(1).first
      consumer = build_consumer
      consumer.assign(topic => { 0 => first.offset })
      poll_one(consumer, store: true)
      waiting = Queue.new
      reader = Thread.new do
        waiting << true
        consumer.poll(10_000, store: true)
      rescue injected
        :interrupted
      end
      waiting.pop
      Thread.pass until reader.status == "sleep" || !reader.alive? # in the wait (or done: then the raise finds nothing)
      reader.raise(injected)
      expect(reader.value).to eq(:interrupted)

      later = produce(1).first
      expect(poll_one(consumer, store: true).offset).to eq(later.offset)
      consumer.commit
      expect(committed(consumer)).to eq(first.offset + 1)
    end
  end
end
