# frozen_string_literal: true

# fork while a client resolves a broker name slowly (a DNS server that does not
# answer): the fork, and every shell-out (which forks too), must not wait for
# the lookup, no Ruby thread may freeze meanwhile, and a child forked
# mid-lookup must still resolve names for clients of its own. The scenario runs
# under the slow-resolver shim (spec/support/scenarios/slow_resolver.c): names
# ending in ".slow.invalid" take 120 s, and getaddrinfo in a process forked
# during such a lookup fails loudly, where glibc could hang for good.
RSpec.describe "fork while a broker name resolves slowly", :kafka do
  include PollingScenarios

  # The target is < 100 ms (each number is printed); the bound leaves room for a loaded machine.
  let(:bound) { 3.0 }
  let(:lookup) { "the broker thread's 120 s name lookup" }

  before(:context) do
    @scenarios = start_scenarios(timeout: 50, env: SlowResolver.env, slow: scenario_file("fork/slow_resolver_fork"))
  end

  let(:outcome) { scenario_outcome(@scenarios, :slow) }

  it "forks, and shells out through system, backticks, IO.popen and Process.spawn, without waiting for the lookup" do
    expect(outcome).to be_success, outcome.describe
    puts "\n  #{TestKafka::MODE}: #{outcome["times"].map { |name, s| "#{name} #{s} s" }.join(", ")}"
    expect(outcome["times"].keys).to eq(%w[fork system backticks popen spawn])
    outcome["times"].each { |name, seconds| expect_elapsed(seconds, within: bound, guards: "#{name} waiting for #{lookup}") }
    expect(outcome["parent_works"]).to be(true)
  end

  it "leaves the parent's other Ruby threads running meanwhile" do
    expect(outcome).to be_success, outcome.describe
    puts "\n  #{TestKafka::MODE}: longest pause of another thread #{outcome["longest_pause"].round(4)} s"
    expect_elapsed(outcome["longest_pause"], within: bound, guards: "another thread held up for #{lookup}")
  end

  it "lets a child forked mid-lookup create a client that resolves a broker name, delivers and closes" do
    expect(outcome).to be_success, outcome.describe
    expect(outcome["child"]).to eq("delivered" => true, "error" => nil), outcome.describe
    expect(outcome["child_exit"]).to eq(0)
  end
end
