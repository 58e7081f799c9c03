# frozen_string_literal: true

require "objspace"

RSpec.describe Sluice::Delivery::Handle do
  let(:notifier) { Sluice::Delivery::Notifier.new(1_000) }

  it "reads as a pending handle until resolved, then as its report" do
    handle = described_class.new(notifier, "events", nil)

    expect(handle).to be_pending
    expect(handle.to_h).to eq(topic: "events", partition: nil, offset: nil, error: nil, label: nil)
    expect(handle.resolve(2, 41, 0).wait).to eq(Sluice::Delivery::Report.new("events", 2, 41, nil))
    expect(handle.inspect).to eq('#<Sluice::Delivery::Report topic="events" partition=2 offset=41>')
  end

  it "keeps its label and its error" do
    handle = described_class.new(notifier, "events", { id: 7 }).resolve(-1, -1001, -192)

    expect(handle).to have_attributes(topic: "events", partition: -1, offset: -1001, label: { id: 7 }, success?: false)
    expect(handle.error.code).to eq(:msg_timed_out)
    expect { handle.wait }.to raise_error(Sluice::Errors::ProduceError) { |e| expect(e.delivery_report).to be(handle) }
    expect(handle.wait(raise_response_error: false)).to be(handle)
  end

  it "stays within its object slot, even after handles with a label or a failure: no malloc'd field table (Ruby 3.1)" do
    skip "Ruby #{RUBY_VERSION} sizes an object to its class's fields: only 3.1 embeds 3 and mallocs the rest" unless RUBY_VERSION < "3.2"

    handles = [described_class.new(notifier, "events", :label).resolve(0, 1, 0),
               described_class.new(notifier, "events", nil).resolve(-1, -1001, -192),
               described_class.new(notifier, "events", nil).resolve(0, 2, 0)]

    expect(handles.map { |h| ObjectSpace.memsize_of(h) }).to all(eq(GC::INTERNAL_CONSTANTS[:RVALUE_SIZE]))
  end
end
