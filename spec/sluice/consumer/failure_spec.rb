# frozen_string_literal: true

require "sluice/testing"

# Consumer::Failure's parts without a broker: the backoff's steps and its
# stop-aware wait, and what a dead letter carries of its error.
RSpec.describe Sluice::Consumer::Failure do
  describe Sluice::Consumer::Failure::Backoff do
    let(:backoff) { described_class.new(0.1..1.0) }

    it "grows exponentially with jitter, within the range" do
      expect(backoff.delay(1)).to eq(0.1) # half of the low end, clamped to it
      expect(Array.new(50) { backoff.delay(3) }).to all(be_between(0.2, 0.4))
      expect(Array.new(50) { backoff.delay(30) }).to all(be_between(0.5, 1.0))
    end

    it "ends a wait soon after the read is stopped" do
      stopped = Queue.new
      waiter = Thread.new { backoff.wait(30, -> { !stopped.empty? }) }
      stopped << true
      expect_within(2, guards: "the 30 s wait") { expect(waiter.value).to be(false) }
      expect(backoff.wait(0.01, -> { false })).to be(true)
    end
  end

  describe Sluice::Consumer::Failure::DeadLetters do
    let(:producer) { Sluice::Testing.producer }

    after { producer.close }

    it "never carries a secret of the consumer's settings in the error's message, and bounds its length" do
      letters = described_class.new(topic: "orders.dlq", producer: producer, partitioner: :key, consumer: nil, group: "billing",
                                    kafka: { "sasl.password": "hunter2", "bootstrap.servers": "k:9092" })
      message = Sluice::Testing::Consumer.new.tap { |c| c.feed(topic: "orders", payload: "p") }.tap { |c| c.subscribe("orders") }.poll
      letters.deliver([message], RuntimeError.new("login as alice/hunter2 failed at k:9092"), 1)
      letters.deliver([message], RuntimeError.new("x" * 5_000), 1)
      first, second = producer.client.messages.map { |letter| letter[:headers]["error_message"] }
      expect(first).to eq("login as alice/[FILTERED] failed at k:9092")
      expect(second.bytesize).to be <= described_class::MAX_ERROR_MESSAGE + 3
    end
  end

  it "refuses settings out of range, naming them" do
    policy = lambda { |**settings|
      described_class.policy(stopped: -> {}, instrument: ->(*) {}, host: lambda { |*|
                                                                         }, **{ retries: nil, dead_letter: nil }.merge(settings))
    }
    expect(policy.call).to be_nil
    expect { policy.call(retries: 3) }.to raise_error(ArgumentError, /retries takes/)
    expect { policy.call(retries: { attempts: 2, tries: 1 }) }.to raise_error(ArgumentError, /unknown: tries/)
    expect { policy.call(retries: { attempts: 1.5 }) }.to raise_error(ArgumentError, /attempts is an Integer/)
    expect { policy.call(retries: { backoff: 2..1 }) }.to raise_error(ArgumentError, /backoff is a Range/)
    expect { policy.call(retries: { backoff: 0.1.. }) }.to raise_error(ArgumentError, /backoff is a Range/)
    expect { policy.call(dead_letter: "") }.to raise_error(ArgumentError, /non-empty String/)
    expect { policy.call(dead_letter: { topic: "d", producer: Object.new }) }.to raise_error(ArgumentError, /producer is a Sluice::Producer/)
  end
end
