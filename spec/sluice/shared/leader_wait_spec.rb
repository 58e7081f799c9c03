# frozen_string_literal: true

# LeaderWait: a query answered "not yet" (a leader moving, a coordinator
# loading) is asked again within the caller's deadline, and only then.
RSpec.describe Sluice::Shared::LeaderWait do
  def code(name) = Sluice::KafkaError.number_for(name)

  it "asks again while the answer is pending, and returns the first other answer" do
    answers = [[code(:not_coordinator)], [code(:coordinator_load_in_progress)], [0, :offsets]]
    result = described_class.retrying(Sluice::Shared::Clock.now + 5, pending: described_class::COORDINATOR_PENDING) { answers.shift }
    expect(result).to eq([0, :offsets])
    expect(answers).to be_empty
  end

  it "returns an answer that is not pending at once, and a pending one once the deadline passed" do
    asked = 0
    failed = described_class.retrying(Sluice::Shared::Clock.now + 5,
                                      pending: described_class::COORDINATOR_PENDING) do
      [code(:group_authorization_failed)].tap do
        asked += 1
      end
    end
    expect([failed, asked]).to eq([[code(:group_authorization_failed)], 1])
    late = described_class.retrying(Sluice::Shared::Clock.now - 1, pending: described_class::COORDINATOR_PENDING) { [code(:not_coordinator)] }
    expect(late).to eq([code(:not_coordinator)])
  end
end
