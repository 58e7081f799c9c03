# frozen_string_literal: true

RSpec.describe "Transactional producer", :kafka, timeout: 120 do
  let(:topic) { "sluice-spec-txn" } # one partition: offsets order everything
  let(:producer) { build_producer(kafka: { "transactional.id": "sluice-spec-txn-#{SecureRandom.hex(6)}" }) }

  # Payloads a read_committed consumer sees from `offset` up to and including
  # `last` (other runs may write to the topic at the same time: callers filter
  # on their own unique payloads).
  def committed_until(offset, last)
    consume_until(topic, 0, offset, isolation: "read_committed") { |m| m[:payload] == last }.map { |m| m[:payload] }
  end

  def uncommitted_at(offset)
    consume(topic, 0, offset, 1, isolation: "read_uncommitted").first[:payload]
  end

  it "makes a committed block's messages visible to a read_committed consumer and returns the block's value" do
    id = SecureRandom.hex(4)
    reports = nil
    value = producer.transaction do
      expect(producer.transaction?).to be(true)
      reports = producer.produce_many_sync(Array.new(3) { |i| { topic: topic, payload: "commit-#{id}-#{i}" } })
      :the_value
    end

    expect(value).to eq(:the_value)
    expect(producer.transaction?).to be(false)
    expect(reports.map(&:error)).to all(be_nil)
    expect(committed_until(reports.first.offset, "commit-#{id}-2").grep(/#{id}/)).to eq(Array.new(3) { |i| "commit-#{id}-#{i}" })
  end

  it "aborts and re-raises when the block raises; the aborted messages stay invisible, a later commit is visible" do
    id = SecureRandom.hex(4)
    aborted = nil
    expect do
      producer.transaction do
        aborted = producer.produce_sync(topic: topic, payload: "aborted-#{id}")
        raise ArgumentError, "changed my mind"
      end
    end.to raise_error(ArgumentError, "changed my mind")

    later = producer.transaction { producer.produce_sync(topic: topic, payload: "later-#{id}") }

    expect(later.offset).to be > aborted.offset
    expect(committed_until(aborted.offset, "later-#{id}").grep(/#{id}/)).to eq(["later-#{id}"])
    # the aborted message was written, only hidden: read_uncommitted sees it
    expect(uncommitted_at(aborted.offset)).to eq("aborted-#{id}")
  end

  it "aborts quietly on Sluice::AbortTransaction, returning nil" do
    id = SecureRandom.hex(4)
    aborted = nil
    value = producer.transaction do
      aborted = producer.produce_sync(topic: topic, payload: "quiet-abort-#{id}")
      raise Sluice::AbortTransaction
    end
    later = producer.transaction { producer.produce_sync(topic: topic, payload: "after-quiet-#{id}") }

    expect(value).to be_nil
    expect(committed_until(aborted.offset, "after-quiet-#{id}").grep(/#{id}/)).to eq(["after-quiet-#{id}"])
    expect(uncommitted_at(aborted.offset)).to eq("quiet-abort-#{id}")
    expect(later.offset).to be > aborted.offset
  end

  it "lets a nested transaction join the outer one: aborting the outer aborts the inner's messages" do
    id = SecureRandom.hex(4)
    outer_report = inner_report = inner_value = nil
    producer.transaction do
      outer_report = producer.produce_sync(topic: topic, payload: "outer-#{id}")
      inner_value = producer.transaction do
        inner_report = producer.produce_sync(topic: topic, payload: "inner-#{id}")
        :inner
      end
      raise Sluice::AbortTransaction
    end
    final = producer.transaction { producer.produce_sync(topic: topic, payload: "final-#{id}") }

    expect(inner_value).to eq(:inner)
    expect(inner_report.offset).to be > outer_report.offset
    expect(committed_until(outer_report.offset, "final-#{id}").grep(/#{id}/)).to eq(["final-#{id}"])
    expect(uncommitted_at(inner_report.offset)).to eq("inner-#{id}")
    expect(final.offset).to be > inner_report.offset
  end

  # WaterDrop's behaviour: librdkafka refuses these messages ("Erroneous state") otherwise.
  it "runs a produce outside any transaction in a transaction of its own, committed before it returns" do
    id = SecureRandom.hex(4)
    events = Queue.new
    %w[transaction.started transaction.committed].each { |name| producer.monitor.subscribe(name) { events << name } }

    report = producer.produce_sync(topic: topic, payload: "own-#{id}-sync")
    handle = producer.produce_async(topic: topic, payload: "own-#{id}-async")
    many = producer.produce_many_sync([{ topic: topic, payload: "own-#{id}-many" }])
    producer.produce_many_async([{ topic: topic, payload: "own-#{id}-many-async" }])

    expect(Array.new(8) { events.pop }.tally).to eq("transaction.started" => 4, "transaction.committed" => 4)
    expect([report, handle.wait, many.first].map(&:error)).to all(be_nil)
    expect(committed_until(report.offset, "own-#{id}-many-async").grep(/own-#{id}/))
      .to eq(%W[own-#{id}-sync own-#{id}-async own-#{id}-many own-#{id}-many-async])
  end

  it "flushes its buffer outside a transaction in one of its own, and close sends what is still buffered" do
    id = SecureRandom.hex(4)
    producer.buffer_many([{ topic: topic, payload: "buf-#{id}-0" }, { topic: topic, payload: "buf-#{id}-1" }])
    reports = producer.flush_sync
    expect(reports.map(&:error)).to all(be_nil)
    producer.buffer(topic: topic, payload: "buf-#{id}-at-close")
    producer.close
    expect(committed_until(reports.first.offset, "buf-#{id}-at-close").grep(/buf-#{id}/))
      .to eq(%W[buf-#{id}-0 buf-#{id}-1 buf-#{id}-at-close])
  end

  it "keeps another thread's produce out of an open transaction: it waits and commits on its own" do
    id = SecureRandom.hex(4)
    inside = Queue.new
    outside_report = nil
    outsider = nil
    expect do
      producer.transaction do
        producer.produce_sync(topic: topic, payload: "inner-#{id}")
        outsider = Thread.new do
          inside << true
          outside_report = producer.produce_sync(topic: topic, payload: "outer-#{id}")
        end
        inside.pop
        raise Sluice::AbortTransaction
      end
    end.not_to raise_error
    outsider.join

    # The aborted transaction took only its own message; the other thread's was committed on its own.
    expect(committed_until(outside_report.offset, "outer-#{id}").grep(/#{id}/)).to eq(["outer-#{id}"])
  end

  it "refuses #transaction on a producer without transactional.id with TransactionError :not_configured" do
    plain = build_producer
    expect(plain).not_to be_transactional
    ran = false
    expect { plain.transaction { ran = true } }.to raise_error(Sluice::Errors::TransactionError) do |error|
      expect(error.code).to eq(:not_configured)
      expect(error.message).to match(/transactional\.id/)
    end
    expect(ran).to be(false)
    expect(plain.transaction?).to be(false)
  end

  it "refuses #transaction after close with ProducerClosedError" do
    expect(producer).to be_transactional
    producer.close
    expect { producer.transaction { nil } }.to raise_error(Sluice::Errors::ProducerClosedError)
  end
end

RSpec.describe "Transactions and idempotence", :kafka, timeout: 120 do
  let(:topic) { "sluice-spec-txn" }
  let(:producer) { build_producer(kafka: { "transactional.id": "sluice-spec-#{SecureRandom.hex(4)}" }) }

  # This example's committed payloads from offset on: the topic is shared with transaction_edges_spec.rb,
  # which another process of a split run (bin/rspec-parallel) may write to at the same time.
  def committed_payloads(from_offset, id)
    committed_since(topic, from_offset).select { |payload| payload.end_with?("-#{id}") }
  end

  it "commits on normal exit, aborts on error (re-raised) and on AbortTransaction (quietly)" do
    id = SecureRandom.hex(4)
    first = producer.transaction { producer.produce_sync(topic: topic, payload: "committed-1-#{id}") }
    # Aborts wait for the delivery first: aborting while librdkafka still registers the
    # partition with the coordinator can fail with INVALID_TXN_STATE (librdkafka issue 4849).
    expect do
      producer.transaction do
        producer.produce_sync(topic: topic, payload: "aborted-1-#{id}")
        raise ArgumentError, "no"
      end
    end
      .to raise_error(ArgumentError, "no")
    quiet = producer.transaction do
      producer.produce_sync(topic: topic, payload: "aborted-2-#{id}")
      raise Sluice::AbortTransaction
    end
    value = producer.transaction do
      producer.transaction { producer.produce_async(topic: topic, payload: "nested-#{id}") } # joins the outer one
      producer.produce_async(topic: topic, payload: "committed-2-#{id}")
      :block_value
    end

    expect(quiet).to be_nil
    expect(value).to eq(:block_value)
    expect(committed_payloads(first.offset, id)).to eq(%W[committed-1-#{id} nested-#{id} committed-2-#{id}])
  end

  it "refuses #transaction on a producer without transactional.id" do
    plain = build_producer
    expect { plain.transaction {} }.to raise_error(Sluice::Errors::TransactionError, /transactional.id/)
  end

  it "delivers in order with an idempotent producer" do
    idempotent = build_producer(kafka: { "enable.idempotence": true })
    reports = Array.new(100) { |i| idempotent.produce_async(topic: "sluice-spec-1p", payload: i.to_s) }.map(&:wait)

    expect(consume_reports(reports).map { |m| m[:payload] }).to eq(Array.new(100, &:to_s))
  end
end
