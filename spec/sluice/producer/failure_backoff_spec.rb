# frozen_string_literal: true

# The wait between transactions that failed in a row (issue 46), on a clock of the spec's own.
RSpec.describe Sluice::Producer::FailureBackoff do
  subject(:backoff) { described_class.new(clock: -> { @now }) }

  before { @now = 100.0 }
  let(:fatal) { Sluice::Errors::ProduceError.new(Sluice::KafkaError.new(Sluice::KafkaError.number_for(:fenced), fatal: true)) }
  let(:refused) do
    Sluice::Errors::TransactionError.new("commit transaction", Sluice::KafkaError.new(Sluice::KafkaError.number_for(:timed_out)))
  end

  def later(seconds)
    @now += seconds
    backoff.remaining
  end

  it "waits nothing before the first failure" do
    expect(backoff.remaining).to eq(0.0)
  end

  it "doubles the wait with each failure in a row, up to LONGEST, counting what passed since the last one" do
    waits = Array.new(8) do
      backoff.failed(refused)
      backoff.remaining
    end
    expect(waits).to eq([0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0])
    expect(later(2)).to eq(3.0)
    expect(later(10)).to eq(0.0)
  end

  it "counts TransactionErrors and fatal errors, not the block's own errors or retriable delivery failures" do
    backoff.failed(RuntimeError.new("the application's"))
    backoff.failed(Sluice::Errors::ProduceError.new(Sluice::KafkaError.new(Sluice::KafkaError.number_for(:msg_timed_out))))
    expect(backoff.count).to eq(0)
    backoff.failed(fatal)
    backoff.failed(refused)
    expect(backoff.count).to eq(2)
  end

  it "starts over after a commit" do
    3.times { backoff.failed(refused) }
    backoff.reset
    expect(backoff.remaining).to eq(0.0)
    backoff.failed(refused)
    expect(backoff.remaining).to eq(0.1)
  end
end
