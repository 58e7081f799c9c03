# frozen_string_literal: true

require "securerandom"

# A producer the application never closed is closed at process exit
# (Sluice::Shared::Shutdown): what it still holds is delivered, within its
# max_wait_timeout, or its loss is reported — logged and as error.occurred
# (type "producer.close_at_exit"). It used to be dropped silently: 0 of 6
# messages arrived (issue 11, item 5). Each scenario is a process of its own
# that simply ends; both start at once.
RSpec.describe "A producer still open at process exit", :kafka do
  include PollingScenarios

  let(:topic) { "sluice-spec-1p" }

  before(:context) do
    @run = SecureRandom.hex(4)
    @start_offset = build_producer.produce_sync(topic: "sluice-spec-1p", payload: "exit-spec #{@run} start").offset + 1
    # In spec/support/scenarios/lifecycle/exit_without_close/: each simply ends.
    @scenarios = start_scenarios(timeout: 30, deliverable: scenario_file("lifecycle/exit_without_close/deliverable", @run),
                                 undeliverable: scenario_file("lifecycle/exit_without_close/undeliverable"))
  end

  def outcome(name)
    scenario_outcome(@scenarios, name).tap { |o| expect(o).to be_success, o.describe }
  end

  it "delivers the messages it still held" do
    r = outcome(:deliverable)
    expect(r.output).to include("PRODUCED")
    expect(r.output).not_to include("ERROR-EVENT")

    payloads = consume_until(topic, 0, @start_offset) { |m| m[:payload] == "exit-spec #{@run} 5" }.map { |m| m[:payload] }
    expect(payloads.grep(/\Aexit-spec #{@run} \d\z/)).to eq(Array.new(6) { |i| "exit-spec #{@run} #{i}" })
  end

  it "reports the messages it could not deliver within max_wait_timeout, logged and as error.occurred" do
    r = outcome(:undeliverable)
    exit_took = r.output[/EXIT TOOK ([\d.]+)/, 1]
    expect(r.output.scan("PURGED").size).to eq(6)
    expect(r.output).to include("ERROR-EVENT producer.close_at_exit Sluice::Errors::ProduceError")
    expect(r.output).to match(/was still open at exit; closing it dropped 6 message\(s\) not delivered within max_wait_timeout \(500 ms\)/)
    guards = "purging before max_wait_timeout (500 ms), or waiting past it for messages that cannot be delivered"
    expect_elapsed(exit_took&.to_f, at_least: 0.4, within: 3, guards: guards)
  end
end
