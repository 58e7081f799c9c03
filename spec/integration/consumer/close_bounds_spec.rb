# frozen_string_literal: true

# A consumer's close from a signal handler, racing other threads' calls, and
# with no broker to answer (issue 19, items 3, 7 and 9). Each scenario runs in
# a process of its own: a close that hangs or a librdkafka assertion must fail
# the example, not rspec.
RSpec.describe "Consumer close bounds", :kafka do
  include PollingScenarios

  # The scenarios are in spec/support/scenarios/consumer/close_bounds/: trap_on_reader (item 3, a TERM while
  # the usual single-threaded worker reads), broker_down (item 9, no broker answers) and close_race (item 7,
  # close from three threads while others make group calls).
  before(:context) do
    names = %i[trap_on_reader broker_down close_race]
    @scenarios = start_scenarios(timeout: 40, **names.to_h { |name| [name, scenario_file("consumer/close_bounds/#{name}")] })
  end

  def outcome(name) = scenario_outcome(@scenarios, name).tap { |o| expect(o).to be_success, o.describe }

  it "closes at once from a TERM handler that interrupted the reader, and refuses calls after" do
    r = outcome(:trap_on_reader)
    expect(r["closed"]).to be(true)
    expect(r["refused"]).to be(true)
    expect_elapsed(r["seconds"], within: 1.5, guards: "max_wait_timeout (5 s), the handler waiting for the interrupted reader")
  end

  it "bounds commit and close by their timeouts when no broker answers, and reports what was not committed" do
    r = outcome(:broker_down)
    expect_elapsed(r["commit_seconds"], at_least: 1.5, guards: "a commit given up before its 2 s timeout")
    expect_elapsed(r["commit_seconds"], within: 4, guards: "a commit past its 2 s timeout, waiting for a coordinator that never comes")
    expect(r["commit_error"]).to include("timed_out")
    expect_elapsed(r["close_seconds"], within: 4, guards: "a close past its 2 s timeout, waiting for a broker that never answers")
    expect(r["closed"]).to be(true)
    expect(r["errors"]).to include("consumer.commit_error", "consumer.close_error")
  end

  it "closes from three threads at once while others commit, ask and pause: every close returns, no abort" do
    r = outcome(:close_race)
    expect_elapsed(r["slowest"], within: 10, guards: "closes past their 3 s timeout, hanging on each other (the scenario's 40 s)")
    expect(r["wrong_errors"]).to eq({}) # refused calls raise ConsumerClosedError, nothing else
  end
end
