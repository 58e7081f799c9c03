# frozen_string_literal: true

# The slices of a blocking metadata read: what is asked again within the
# caller's deadline, and what is returned at once.
RSpec.describe Sluice::Shared::RefusableRead do
  let(:transport) { Sluice::KafkaError.number_for(:transport) }
  let(:timed_out) { Sluice::KafkaError.number_for(:timed_out) }
  let(:deadline) { Sluice::Shared::Clock.now + 10 }
  let(:no_refusal) { -> {} }

  def read(answers)
    asks = 0
    result = described_class.call(deadline, no_refusal) { (asks += 1) && answers.shift || answers.last }
    [result, asks]
  end

  it "returns a broker's answer at once" do
    expect(read([[0, :metadata]])).to eq([[0, :metadata], 1])
  end

  it "asks again after a broken connection, and returns the answer that follows" do
    expect(read([[transport], [transport], [0, :metadata]])).to eq([[0, :metadata], 3])
  end

  it "returns a connection that stays broken after #{described_class::TRANSPORT_ASKS} asks, not after the whole wait" do
    answers = Array.new(10) { [transport] }
    expect(read(answers)).to eq([[transport], described_class::TRANSPORT_ASKS])
  end

  it "asks again after a slice that timed out, until the deadline" do
    expect(read([[timed_out], [timed_out], [0, :metadata]])).to eq([[0, :metadata], 3])
  end

  it "raises the client's refusal instead of asking again" do
    refusal = Sluice::KafkaError.new(Sluice::KafkaError.number_for(:authentication), "bad password")
    expect { described_class.call(deadline, -> { refusal }) { [transport] } }.to raise_error(Sluice::Errors::AuthenticationError)
  end
end
