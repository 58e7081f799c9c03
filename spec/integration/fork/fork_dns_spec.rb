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
    scenario = <<~'RUBY'
      def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)

      def timed(name, times)
        started = monotonic
        yield
        times[name] = (monotonic - started).round(4)
        puts "#{name}: #{times[name]} s"
      end

      announcements, announcer = IO.pipe
      ENV["SLOW_RESOLVER_FD"] = announcer.fileno.to_s
      parent = make_producer(kafka: { "bootstrap.servers": "broker.slow.invalid:9092,#{BROKERS}",
                                      "enable.sparse.connections": false })
      announcements.read(1) # a broker thread is now inside getaddrinfo, for 120 s

      longest_pause = 0.0
      stop = false
      ticker = Thread.new do
        last = monotonic
        until stop
          sleep 0.001 # a tick: the thread measures how long it could not run
          now = monotonic
          longest_pause = [longest_pause, now - last].max
          last = now
        end
      end

      times = {}
      pid = nil
      timed("fork", times) { pid = fork { exit!(0) } }
      Process.wait(pid)
      timed("system", times) { system("true") }
      timed("backticks", times) { `true` }
      timed("popen", times) { IO.popen(["true"], &:read) }
      timed("spawn", times) { Process.wait(Process.spawn("true")) }
      stop = true
      ticker.join
      puts "longest pause of another thread: #{longest_pause.round(4)} s"

      by_name = BROKERS.split(",").first.sub(/\A[^:]+/, "localhost")
      child, status = in_child do
        own = make_producer(kafka: { "bootstrap.servers": by_name, "message.timeout.ms": 15_000 })
        report = own.produce_sync(topic: "sluice-spec-1p", payload: "child forked mid-lookup")
        own.close
        { "delivered" => report.error.nil?, "error" => report.error&.message }
      end
      result("times" => times, "longest_pause" => longest_pause, "child" => child, "child_exit" => status.exitstatus,
             "by_name" => by_name,
             "parent_works" => parent.produce_sync(topic: "sluice-spec-1p", payload: "parent, after forks").error.nil?)
      # close would wait for the broker thread still inside the 120 s lookup.
      exit!(0)
    RUBY
    @scenarios = start_scenarios(timeout: 50, env: SlowResolver.env, slow: PollingScenarios::FORK_HELPERS + scenario)
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
