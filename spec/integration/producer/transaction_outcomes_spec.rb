# frozen_string_literal: true

# Issue 46: every error raised out of Producer#transaction says what became
# of the transaction (#transaction_outcome): :aborted (it did not commit, and
# never will) or :unknown (a commit was sent and its answer not learned). The
# paths through a broker that stops answering or fences (:unknown after a
# commit, :aborted for a fence before one) are in transaction_outage_spec,
# transaction_edges_spec and spec/cluster/transaction_recovery_spec.
RSpec.describe "What became of a transaction that raised", :kafka, timeout: 120 do
  let(:topic) { "sluice-spec-txn" }
  let(:producer) { build_producer(kafka: { "transactional.id": "sluice-spec-outcome-#{SecureRandom.hex(6)}" }) }

  def raised
    yield
    raise "nothing was raised"
  rescue Exception => e # rubocop:disable Lint/RescueException -- whatever the transaction raised
    e
  end

  def committed_from(offset) = committed_since(topic, offset)

  it "is :aborted on the block's own error, of any class, which keeps its class" do
    error = raised { producer.transaction { raise KeyError, "the application's" } }
    expect(error).to be_a(KeyError)
    expect(error.transaction_outcome).to eq(:aborted)
    expect(error).to be_transaction_aborted
    expect(error).not_to be_transaction_outcome_unknown
  end

  it "is :aborted when the transaction could not begin" do
    plain = build_producer
    error = raised { plain.transaction { nil } }
    expect(error).to be_a(Sluice::Errors::TransactionError)
    expect(error.transaction_outcome).to eq(:aborted)
  end

  it "is :aborted on a delivery failure raised inside the block (produce_sync)" do
    error = raised { producer.transaction { producer.produce_sync(topic: "sluice-spec-small", payload: "x" * 5_000) } }
    expect(error).to be_a(Sluice::Errors::ProduceError)
    expect(error.transaction_outcome).to eq(:aborted)
  end

  # librdkafka refuses the commit as abortable before it sends one: a message
  # of the transaction failed. sluice aborts it.
  it "is :aborted when the commit was refused as abortable (a message of it failed), and nothing of it is read" do
    id = SecureRandom.hex(4)
    first = nil
    error = raised do
      producer.transaction do
        first = producer.produce_sync(topic: topic, payload: "kept-out-#{id}")
        producer.produce_async(topic: "sluice-spec-small", payload: "x" * 5_000) # the broker refuses it: too large
      end
    end
    expect(error).to be_a(Sluice::Errors::TransactionError)
    expect(error).to be_abortable
    expect(error.transaction_outcome).to eq(:aborted)
    expect(committed_from(first.offset).grep(/#{id}/)).to eq([])
  end

  it "is set only by the call that ends the transaction: an error rescued inside a joined one has none" do
    id = SecureRandom.hex(4)
    inner = nil
    report = producer.transaction do
      begin
        producer.transaction { raise ArgumentError, "inner" } # joins the outer transaction
      rescue ArgumentError => e
        inner = e
      end
      producer.produce_sync(topic: topic, payload: "committed-#{id}")
    end
    expect(inner).not_to respond_to(:transaction_outcome)
    expect(committed_from(report.offset).grep(/#{id}/)).to eq(["committed-#{id}"])
  end

  it "leaves no outcome on errors that did not come out of a transaction" do
    error = raised { build_producer.produce_sync(topic: "sluice-spec-small", payload: "x" * 5_000) }
    expect(error).to be_a(Sluice::Errors::ProduceError)
    expect(error.transaction_outcome).to be_nil
  end
end
