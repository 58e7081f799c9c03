# frozen_string_literal: true

# Admin::Requests without a broker: results matched to their requests by number, and every way a waiter
# wakes up (a result, a close, a refusal, its timeout). Integration specs reach it only through a cluster.
RSpec.describe Sluice::Admin::Requests do
  subject(:requests) { described_class.new }

  # A thread waiting in #wait, once it sleeps on the condition variable: what the example does next
  # reaches a wait in progress instead of racing its start.
  def waiting(&block)
    thread = Thread.new(&block)
    deadline = Sluice::Shared::Clock.now + 5
    Thread.pass until thread.status == "sleep" || !thread.alive? || Sluice::Shared::Clock.now > deadline
    expect(thread.status).to eq("sleep"), "the waiter never waited"
    thread
  end

  it "numbers requests from 1, each a new number" do
    expect(Array.new(3) { requests.open }).to eq([1, 2, 3])
  end

  it "hands a delivered result to its request, without the number" do
    id = requests.open
    requests.deliver([id, 0, "ok", { topic: "t" }])

    expect(requests.wait(id, 0)).to eq([0, "ok", { topic: "t" }])
    expect(requests.result(id)).to eq([0, "ok", { topic: "t" }])
  end

  it "keeps each result with its own request when they arrive out of order" do
    first = requests.open
    second = requests.open
    requests.deliver([second, 0, "second", nil])
    requests.deliver([first, 3, "first", nil])

    expect([requests.result(first), requests.result(second)]).to eq([[3, "first", nil], [0, "second", nil]])
  end

  it "has no result before one arrives, and gives up after the timeout" do
    id = requests.open

    expect(requests.result(id)).to be_nil
    expect(requests.wait(id, 20)).to be_nil
  end

  it "drops a result nobody waits for any more (forgotten, or never opened)" do
    id = requests.open
    requests.forget(id)
    requests.deliver([id, 0, "late", nil])
    requests.deliver([99, 0, "unknown", nil])

    expect([requests.result(id), requests.result(99)]).to eq([nil, nil])
  end

  it "counts the results brokers answered, refused ones included, and not librdkafka's own errors" do
    id = requests.open
    requests.deliver([id, 0, "ok", nil])
    requests.deliver([99, 36, "a broker's refusal, for a request given up on", nil])
    requests.deliver([id, -185, "librdkafka's timeout", nil])

    expect(requests.answered).to eq(2)
  end

  it "wakes a waiter with its result" do
    id = requests.open
    waiter = waiting { requests.wait(id, 10_000) }
    requests.deliver([id, 0, "ok", nil])

    expect(waiter.value).to eq([0, "ok", nil])
  end

  it "wakes a waiter with :closed when closed, and answers :closed from then on" do
    id = requests.open
    waiter = waiting { requests.wait(id, 10_000) }
    requests.close

    expect(waiter.value).to eq(:closed)
    expect(requests.wait(requests.open, 10_000)).to eq(:closed)
  end

  it "still hands out a result that arrived before the close" do
    id = requests.open
    requests.deliver([id, 0, "ok", nil])
    requests.close

    expect(requests.wait(id, 0)).to eq([0, "ok", nil])
  end

  it "wakes a waiter with :refused on a refusal after the count it started from, and counts refusals" do
    id = requests.open
    waiter = waiting { requests.wait(id, 10_000, 0) }
    requests.refuse

    expect(waiter.value).to eq(:refused)
    expect(requests.refusals).to eq(1)
    expect(requests.wait(id, 0, 0)).to eq(:refused) # a refusal it had not seen yet
    expect(requests.wait(id, 0, 1)).to be_nil # seen: only the timeout is left
  end
end
