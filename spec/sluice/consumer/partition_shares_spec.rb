# frozen_string_literal: true

# PartitionShares with the consumer's calls recorded: what it pauses, takes
# back and resumes, with no broker.
RSpec.describe Sluice::Consumer::PartitionShares do
  let(:calls) { [] }
  let(:assigned) { { "t" => [0, 1, 2, 3] } }
  let(:shares) do
    described_class.new(max_buffered: 8, assignment: -> { assigned }, pause: ->(*pair) { calls << [:pause, *pair] },
                        resume: ->(*pair) { calls << [:resume, *pair] }, rewind: ->(messages) { calls << [:rewind, messages.map(&:offset)] })
  end

  def message(partition, offset) = Sluice::Message.new("t", partition, offset, nil, "x", 0, nil)

  it "takes a message back, and pauses its partition once, when the partition has its share waiting (8 / 4 partitions)" do
    expect(shares.take_back?(message(0, 5), 1)).to be(false)
    expect(shares.take_back?(message(0, 6), 2)).to be(true)
    expect(shares.take_back?(message(0, 6), 2)).to be(true)
    expect(calls).to eq([[:pause, "t", 0], [:rewind, [6]], [:rewind, [6]]])
  end

  it "resumes a partition it paused once half its share or less waits, and only once" do
    shares.take_back?(message(1, 9), 2)
    calls.clear
    shares.resume_drained { 2 }
    expect(calls).to eq([])
    shares.resume_drained { 1 }
    shares.resume_drained { 0 }
    expect(calls).to eq([[:resume, "t", 1]])
  end

  it "forgets partitions given up, and resumes the rest when the read ends" do
    shares.take_back?(message(0, 1), 2)
    shares.take_back?(message(1, 1), 2)
    shares.rebalanced([["t", 0]])
    calls.clear
    shares.resume_all
    expect(calls).to eq([[:resume, "t", 1]])
  end

  it "starts a message whose partition is no longer assigned (the pause refused it)" do
    refusing = described_class.new(max_buffered: 8, assignment: -> { assigned }, pause: ->(*) { raise Sluice::Errors::ConsumerStateError, "gone" },
                                   resume: ->(*) {}, rewind: ->(_) { raise "not rewound" })
    expect(refusing.take_back?(message(0, 1), 2)).to be(false)
  end

  it "gives the whole bound to a single partition" do
    single = described_class.new(max_buffered: 8, assignment: -> { { "t" => [0] } }, pause: ->(*) {}, resume: ->(*) {}, rewind: ->(_) {})
    expect(single.take_back?(message(0, 1), 7)).to be(false)
  end
end
