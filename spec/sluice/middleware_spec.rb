# frozen_string_literal: true

RSpec.describe Sluice::Middleware do
  subject(:middleware) { described_class.new }

  it "returns the message itself when there are no steps" do
    message = { topic: "t" }
    expect(middleware).to be_empty
    expect(middleware.run(message)).to be(message)
    batch = [message]
    expect(middleware.run_many(batch)).to be(batch)
  end

  it "chains steps: each gets what the previous returned; prepend goes first" do
    middleware.append { |m| m.merge(seen: [*m[:seen], :appended]) }
    middleware.prepend(->(m) { m.merge(seen: [*m[:seen], :prepended]) })
    expect(middleware.append(->(m) { m })).to be(middleware)
    expect(middleware.run({ topic: "t" })).to eq(topic: "t", seen: %i[prepended appended])
    expect(middleware.run_many([{ topic: "a" }, { topic: "b" }]).map { |m| m[:seen] }).to all(eq(%i[prepended appended]))
  end

  it "refuses what cannot be called" do
    expect { middleware.append }.to raise_error(ArgumentError)
    expect { middleware.prepend("x") }.to raise_error(ArgumentError)
  end
end
