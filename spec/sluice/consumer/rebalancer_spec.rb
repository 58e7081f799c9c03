# frozen_string_literal: true

# Consumer::Rebalancer without a broker, over a fake native consumer that records its calls: how each
# rebalance event is answered (eager and cooperative), what is committed before partitions go, what is
# reported, and that librdkafka is never left without an answer when something in between raises.
RSpec.describe Sluice::Consumer::Rebalancer do
  subject(:rebalancer) { described_class.new(client: client, commit: commit, instrument: ->(*event) { events << event }) }

  let(:calls) { [] }
  let(:events) { [] }
  let(:commit) { ->(within, revoked) { calls << [:commit, within, revoked] } }
  let(:answers) { {} } # method => what the fake native call returns (an error tuple, or nil for none)
  let(:client) { fake_client }
  let(:partitions) { [["b", 2, -1001, 0], ["a", 1, -1001, 0], ["a", 0, -1001, 0]] }

  def fake_client(lost: false, assignment: [])
    calls = self.calls
    answers = self.answers
    Object.new.tap do |fake|
      fake.define_singleton_method(:assign) { |pairs, incremental| calls << [:assign, pairs, incremental] && answers[:assign] }
      fake.define_singleton_method(:unassign) { |pairs, incremental| calls << [:unassign, pairs, incremental] && answers[:unassign] }
      fake.define_singleton_method(:assignment_lost?) { lost }
      fake.define_singleton_method(:assignment) { assignment }
    end
  end

  def error_tuple(name) = [Sluice::KafkaError.number_for(name), "#{name} from librdkafka", false, false, false]

  it "assigns what the coordinator gave (eager: the whole assignment) and reports it by topic, sorted" do
    expect(rebalancer.call(:assign, partitions, "EAGER", 0)).to eq([])

    expect(calls).to eq([[:assign, [["b", 2], ["a", 1], ["a", 0]], false]])
    expect(events).to eq([["consumer.partitions_assigned", { partitions: { "b" => [2], "a" => [0, 1] } }]])
  end

  it "assigns an increment under the cooperative protocol" do
    rebalancer.call(:assign, partitions, "COOPERATIVE", 0)

    expect(calls).to eq([[:assign, [["b", 2], ["a", 1], ["a", 0]], true]])
  end

  it "commits before giving partitions up, within the time it was given, and returns what it gave up" do
    given_up = rebalancer.call(:revoke, partitions, "COOPERATIVE", 0, commit_within: 250)

    expect(calls).to eq([[:commit, 250, [["b", 2], ["a", 1], ["a", 0]]], [:unassign, [["b", 2], ["a", 1], ["a", 0]], true]])
    expect(given_up).to eq([["b", 2], ["a", 1], ["a", 0]])
    expect(events).to eq([["consumer.partitions_revoked", { partitions: { "b" => [2], "a" => [0, 1] } }]])
  end

  context "when the assignment was lost (the group went on without this consumer)" do
    let(:client) { fake_client(lost: true) }

    it "gives the partitions up without committing" do
      rebalancer.call(:revoke, partitions, "EAGER", 0)

      expect(calls).to eq([[:unassign, [["b", 2], ["a", 1], ["a", 0]], false]])
    end

    it "says what it gave up uncommitted, before it gives it up" do
      lost = described_class.new(client: client, commit: commit, lost: ->(revoked) { calls << [:lost, revoked] }, instrument: ->(*) {})
      lost.call(:revoke, partitions, "COOPERATIVE", 0)

      expect(calls).to eq([[:lost, [["b", 2], ["a", 1], ["a", 0]]], [:unassign, [["b", 2], ["a", 1], ["a", 0]], true]])
    end
  end

  context "when librdkafka could not rebalance" do
    let(:client) { fake_client(assignment: [["t", 1, 5], ["t", 0, 7]]) }

    it "drops the whole assignment, reports the error and the partitions given up" do
      given_up = rebalancer.call(:error, [], "EAGER", Sluice::KafkaError.number_for(:conflict))

      expect(calls).to eq([[:unassign, nil, false]])
      expect(given_up).to eq([["t", 1], ["t", 0]])
      expect(events.map(&:first)).to eq(["error.occurred", "consumer.partitions_revoked"])
      expect(events.first.last).to include(type: "consumer.rebalance_error", error: have_attributes(code: :conflict))
      expect(events.last.last).to eq(partitions: { "t" => [0, 1] })
    end
  end

  it "reports no partitions given up after a rebalance error when none were assigned" do
    rebalancer.call(:error, [], "EAGER", Sluice::KafkaError.number_for(:conflict))

    expect(events.map(&:first)).to eq(["error.occurred"])
  end

  it "reports a refused answer as a ConsumerError naming the call, and still reports the assignment" do
    answers[:assign] = error_tuple(:state)
    rebalancer.call(:assign, partitions, "COOPERATIVE", 0)

    expect(events.map(&:first)).to eq(["error.occurred", "consumer.partitions_assigned"])
    expect(events.first.last).to include(type: "consumer.rebalance_error", error: be_a(Sluice::Errors::ConsumerError))
    expect(events.first.last[:error]).to have_attributes(code: :state, message: a_string_including("assign"))
  end

  it "reports nothing for the :destroy answer of a group that terminated meanwhile (a closing consumer's)" do
    answers[:unassign] = error_tuple(:destroy)
    rebalancer.call(:revoke, partitions, "EAGER", 0)

    expect(events.map(&:first)).to eq(["consumer.partitions_revoked"])
  end

  context "when the commit before a revoke raises" do
    let(:commit) { ->(_within, _revoked) { raise Interrupt } }

    it "still answers librdkafka (drops the whole assignment) and raises on" do
      expect { rebalancer.call(:revoke, partitions, "COOPERATIVE", 0) }.to raise_error(Interrupt)
      expect(calls).to eq([[:unassign, nil, false]])
    end
  end

  # The Inbox hands an event whose answer was cut short (a Task#stop) here again.
  it "answers an event handed again once, and gives what it gave up the first time" do
    rebalancer.call(:revoke, partitions, "EAGER", 0)
    first = calls.dup

    expect(rebalancer.call(:revoke, partitions, "EAGER", 0)).to eq([["b", 2], ["a", 1], ["a", 0]])
    expect(calls).to eq(first)
    rebalancer.call(:revoke, partitions.dup, "EAGER", 0) # another event, equal
    expect(calls.size).to eq(2 * first.size)
  end

  it "answers once only when what comes after the answer raises" do
    failing = described_class.new(client: client, commit: commit, instrument: ->(*) { raise "listener failed" })

    expect { failing.call(:assign, partitions, "EAGER", 0) }.to raise_error(RuntimeError, "listener failed")
    expect(calls).to eq([[:assign, [["b", 2], ["a", 1], ["a", 0]], false]])
  end
end
