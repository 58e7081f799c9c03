# frozen_string_literal: true

require "sluice/testing"

RSpec.describe Sluice::Testing::Matchers do
  let(:producer) { Sluice::Testing.producer }

  after { producer.close }

  before do
    producer.produce_sync(topic: "events", payload: "created", key: "user-1", headers: { "type" => "created" })
    producer.produce_sync(topic: "events", payload: "updated", key: "user-1")
  end

  it "matches by the fields given, with values or composable matchers" do
    expect(producer).to have_produced(topic: "events", payload: "created")
    expect(producer).to have_produced(topic: :events, key: "user-1").twice
    expect(producer).to have_produced(topic: "events", headers: hash_including("type" => "created")).once
    expect(producer).to have_produced(payload: a_string_starting_with("up"), key: "user-1").times(1)
    expect(producer).not_to have_produced(topic: "audit")
    expect(producer).not_to have_produced(topic: "events", key: nil)
  end

  it "fails with what it wanted and what was produced" do
    expect { expect(producer).to have_produced(topic: "events", payload: "deleted") }
      .to raise_error(RSpec::Expectations::ExpectationNotMetError, <<~MESSAGE.chomp)
        expected to have produced a message with topic: "events", payload: "deleted", found 0 such messages; produced:
          {topic: "events", payload: "created", key: "user-1", headers: {"type" => "created"}}
          {topic: "events", payload: "updated", key: "user-1"}
      MESSAGE
  end

  it "writes the fields it wanted as it lists the messages, on every Ruby" do
    expect { expect(producer).to have_produced(headers: { "type" => "deleted" }) }
      .to raise_error(RSpec::Expectations::ExpectationNotMetError, /\Aexpected to have produced a message with headers: \{"type" => "deleted"\},/)
  end

  it "fails a count that differs, saying how many it found" do
    expect { expect(producer).to have_produced(topic: "events").once }
      .to raise_error(RSpec::Expectations::ExpectationNotMetError, /a message with topic: "events" 1 time\(s\), found 2 such messages/)
  end

  it "fails a negated match that found one" do
    expect { expect(producer).not_to have_produced(payload: "created") }
      .to raise_error(RSpec::Expectations::ExpectationNotMetError, /not to have produced a message with payload: "created", found 1 such message;/)
  end

  it "says when nothing was produced" do
    producer.client.reset
    expect { expect(producer).to have_produced(topic: "events") }
      .to raise_error(RSpec::Expectations::ExpectationNotMetError, /found 0 such messages; nothing was produced\z/)
  end

  it "refuses a producer whose client keeps nothing, and unknown fields" do
    dummy = Sluice::Testing.producer { |config| config.client_class = Sluice::Clients::Dummy }
    expect { expect(dummy).to have_produced(topic: "events") }.to raise_error(ArgumentError, /Sluice::Clients::Buffered/)
    expect { have_produced(topik: "events") }.to raise_error(ArgumentError, /unknown: topik/)
  ensure
    dummy&.close
  end
end
