# frozen_string_literal: true

# WaterDrop's client_class integration scenario (waterdrop
# test/integrations/fork_finalizer_close_safety), through the migration
# guide's mapping: WaterDrop:: becomes Sluice::, the client is built with the
# librdkafka properties (not the producer), and its #destroy is WaterDrop's
# #close. A tracing client records every close with the pid that ran it; a
# forked child that never touches the inherited producer must not close the
# parent's client at its exit. No broker: the Dummy client contacts none.
RSpec.describe "WaterDrop's client_class scenario, renamed" do
  it "a forked child's exit does not close the parent's client; the parent's close does, once" do
    output, status = run_scenario_file(File.expand_path("../../support/scenarios/testing/waterdrop_fork_close.rb", __dir__), timeout: 30)
    expect(status).to be_success, output
    child, parent = output[/child=(\d+) parent=(\d+)/, 0].scan(/\d+/)
    closes = output[/closes=(.*)$/, 1]
    expect(closes).not_to include("ran_in=#{child}")
    expect(closes).to eq(["close ran_in=#{parent} built_in=#{parent}"].inspect)
  end
end
