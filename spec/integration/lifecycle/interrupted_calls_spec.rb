# frozen_string_literal: true

# An interrupt (Timeout, Thread#raise, Thread#kill) that lands while a thread
# waits in a GVL-released native call (flush, the metadata lookup of the first
# partition_key) or in produce_sync must leave the producer whole: the call's
# in-flight count ends, the producer can still be used, close returns promptly
# and every handle resolves. It used to leave the count up, and close then
# spun forever (issue 11, item 1). A regression hangs the process, so each
# scenario runs in its own (killed after `timeout`); all start at once.
# :longjmp — Timeout and Thread#raise unwind native frames with Ruby's own
# longjmp, which AddressSanitizer does not see: the stack poison of the
# unwound frames stays and later, valid writes to that stack are reported
# (bin/asan leaves these out).
RSpec.describe "Interrupted blocking calls", :kafka, :longjmp do
  include PollingScenarios

  # The scenarios, with their helpers, are in spec/support/scenarios/lifecycle/interrupted_calls/.
  before(:context) do
    names = %i[timeout_flush timeout_flush_deliverable raise_and_kill interrupted_commit timeout_partition_key]
    @scenarios = start_scenarios(timeout: 30, **names.to_h { |name| [name, scenario_file("lifecycle/interrupted_calls/#{name}")] })
  end

  def outcome(name)
    scenario_outcome(@scenarios, name).tap { |o| expect(o).to be_success, o.describe }
  end

  it "Timeout around a flush that cannot finish: raises in time, the producer still works, close returns promptly" do
    r = outcome(:timeout_flush)
    expect(r["timed_out"]).to be(true)
    expect_elapsed(r["timeout_s"], within: 1.5, guards: "the flush's own wait, which never ends, Timeout's 0.3 s not raised")
    expect(r["flush_again"]).to be(false)
    expect_elapsed(r["flush_again_s"], at_least: 0.05, within: 1.5, guards: "flush(100) returning before its 100 ms, or stuck past it")
    expect(r["closed"]).to be(true)
    expect_elapsed(r["close_s"], within: 5, guards: "a close past its 200 ms timeout, spinning on a leftover in-flight count (issue 11)")
    expect(r["outstanding"]).to eq(0)
    expect(r["handles"]).to eq("purge_queue" => 6)
  end

  it "Timeout around a flush that would succeed: close afterwards still delivers every message" do
    r = outcome(:timeout_flush_deliverable)
    expect(r["timed_out"]).to be(true)
    expect(r["closed"]).to be(true)
    expect(r["outstanding"]).to eq(0)
    expect(r["handles"]).to eq("delivered" => 20_000)
  end

  it "Thread#raise and Thread#kill into flush and produce_sync: close returns promptly and every handle resolves" do
    r = outcome(:raise_and_kill)
    expect(r.data.values_at("raised_flush", "killed_flush", "raised_produce_sync", "killed_produce_sync"))
      .to eq(%w[RuntimeError returned RuntimeError returned])
    expect(r["flush_again"]).to be(false)
    expect(r["inflight_before_close"]).to eq(5) # 3 + the two produce_sync messages, still queued
    expect(r["closed"]).to be(true)
    expect_elapsed(r["close_s"], within: 5, guards: "a close past its 200 ms timeout, spinning on a leftover in-flight count (issue 11)")
    expect(r["outstanding"]).to eq(0)
    expect(r["handles"]).to eq("purge_queue" => 3)
  end

  it "an interrupt pending when a consumer commit reaches the gate: raised, and the commit's partition list is freed" do
    r = outcome(:interrupted_commit)
    expect(r["interrupted"]).to eq(22_000)
    expect(r["rss_growth_kb"]).to be < 10_000
  end

  it "Timeout around the first partition_key lookup: raises once the lookup returned, and close returns promptly" do
    r = outcome(:timeout_partition_key)
    expect(r["outcome"]).to eq("Timeout::Error")
    guards = "Timeout raising before its 0.3 s, or a lookup past max_wait_timeout (1 s)"
    expect_elapsed(r["timeout_s"], at_least: 0.3, within: 3, guards: guards)
    expect(r["closed"]).to be(true)
    expect_elapsed(r["close_s"], within: 5, guards: "a close past its 200 ms timeout, spinning on a leftover in-flight count (issue 11)")
    expect(r["outstanding"]).to eq(0)
    expect(r["handles"]).to eq("purge_queue" => 1)
  end
end
