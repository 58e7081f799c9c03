# frozen_string_literal: true

# Consumer scenarios that need a process of their own (long waits on the
# group's timers, signals, fork, resource counts), all started at once in
# before(:context) so their waits overlap.
# The scenarios are in spec/support/scenarios/consumer/own_process/, with their helpers.
RSpec.describe "Consumer scenarios in their own process", :kafka do
  include PollingScenarios

  before(:context) do
    names = %i[idle slow trap_close leaks forked]
    @scenarios = start_scenarios(timeout: 90, **names.to_h { |name| [name, scenario_file("consumer/own_process/#{name}")] })
  end

  def outcome(name)
    scenario_outcome(@scenarios, name).tap { |o| expect(o).to be_success, o.describe }
  end

  it "keeps an idle consumer in its group for 2 x max.poll.interval.ms: no revoke, no error, same member" do
    o = outcome(:idle)
    expect_elapsed(o["idle_s"], at_least: 20, guards: "each_message returning before 2 x max.poll.interval.ms (20 s) of idling")
    expect(o["revoked"]).to eq(0)
    expect(o["errors"]).to eq([])
    expect(o["same_member"]).to be(true)
    expect(o["assignment"]).to eq("sluice-spec-idle" => [0])
  end

  it "reports a block longer than max.poll.interval.ms (max_poll_exceeded) and gives its partitions up" do
    o = outcome(:slow)
    expect_elapsed(o["blocked_s"], at_least: 13, guards: "the block cut short, within max.poll.interval.ms (10 s)")
    expect(o["errors"]).to include("max_poll_exceeded")
    expect(o["revoked"]).to include("sluice-spec-slow" => [0])
  end

  it "closes from a signal handler while each_message waits: each_message returns, consumer.closed once" do
    o = outcome(:trap_close)
    expect(o["closed"]).to be(true)
    expect(o["closed_events"]).to eq(1)
  end

  it "refuses the parent's consumer in a forked child (ForkedProcessError); the parent works and closes" do
    o = outcome(:forked)
    expect(o["children"].map { |child| child.except("own_closed") })
      .to eq([{ "error" => "Sluice::Errors::ForkedProcessError", "inherited_closed" => true,
                "exit" => 0, "parent_works" => true, "parent_closed" => true, "count" => 40 }])
  end

  it "lets a child forked while the parent's consumer connects create, use and close a consumer of its own" do
    o = outcome(:forked)
    skip o["own_client_unsafe"] if o["own_client_unsafe"]
    expect(o["children"].map { |child| child["own_closed"] }).to eq([true])
  end

  it "leaks no fd, thread or memory over 40 create/read/close cycles" do
    o = outcome(:leaks)
    before = o["before"]
    after = o["after"]
    expect(after["fds"]).to be <= before["fds"]
    expect(after["threads"]).to be <= before["threads"]
    # AddressSanitizer (bin/asan) keeps freed memory in quarantine: RSS says nothing there.
    expect(after["rss_kb"] - before["rss_kb"]).to be < 20_000 unless ENV.fetch("LD_PRELOAD", "").include?("libasan")
  end
end
