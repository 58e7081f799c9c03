# frozen_string_literal: true

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "sluice"
require "timeout"

Dir[File.join(__dir__, "support", "*.rb")].sort.each { |file| require file }
# The scenario processes' consumers follow SLUICE_GROUP_PROTOCOL too (spec/support/group_protocol.rb).
ENV["RUBYOPT"] = "#{ENV.fetch("RUBYOPT", nil)} -r#{File.join(__dir__, "support", "group_protocol.rb")}".strip if GroupProtocol.consumer?

RSpec.configure do |config|
  config.disable_monkey_patching!
  config.order = :random
  config.filter_run_when_matching :focus
  # One file per process of a split run (bin/rspec-parallel numbers them): rspec rewrites it whole at the end.
  config.example_status_persistence_file_path = File.expand_path("../tmp/rspec-status#{ENV.fetch("TEST_ENV_NUMBER", "")}.txt", __dir__)
  config.include SpecHelpers

  # Broker-failure specs need the three-node cluster and a few minutes: bin/test-cluster runs them.
  config.filter_run_excluding :cluster unless ENV["SLUICE_CLUSTER_SPECS"] == "1"
  # Specs that start, stop and kill a broker of their own (OwnBroker): a run of their own (bin/test runs
  # them after the others), so the broker they leave dying and the clients still tearing down towards it
  # cannot slow the timing-sensitive specs of the main run (seen in CI: delivery reports 5 s late after them).
  config.filter_run_excluding :own_broker unless ENV["SLUICE_OWN_BROKER_SPECS"] == "1"
  # What only the classic group protocol does (eager revocation, a client-side assignor, session settings).
  config.before(:each, :classic_protocol) do
    skip("the classic group protocol's behaviour (SLUICE_GROUP_PROTOCOL=consumer)") if GroupProtocol.consumer?
  end

  # Integration specs need the broker and the shared topics (created once, up
  # front: a first message to a missing topic waits for auto-creation).
  config.before(:suite) { TestKafka.prepare! if RSpec.world.example_groups.any? { |g| g.metadata[:kafka] } }

  # Nothing hangs forever: a stuck example fails instead of stalling CI, and
  # says where every thread was (a CI log is often all there is to go on).
  # One stuck where Timeout cannot reach it (a native call with interrupts
  # masked) ends the run a minute later: red at once, not over time.
  config.around(:each) do |example|
    limit = example.metadata.fetch(:timeout, 60)
    watchdog = Thread.new do
      sleep(limit + 60)
      ThreadDump.warn_all(example, "is still running a minute after its timeout: ending the run")
      ThreadDump.record(example)
      exit!(1)
    end
    Timeout.timeout(limit) { example.run }
  rescue Timeout::Error
    ThreadDump.warn_all(example, "timed out")
    raise
  ensure
    watchdog&.kill
  end

  config.after(:each) do
    close_test_consumers
    close_test_producers
  end

  # The exit is bounded too: the close of Shared::Shutdown's at_exit hook
  # (installed with the first client, so it runs after this one) may wait on a
  # client that an example which timed out left stuck, its watchdog gone.
  config.after(:suite) do
    at_exit do
      Thread.new do
        sleep(120)
        warn "rspec is still exiting 120 s after its last example: ending it"
        ThreadDump.record("the exit")
        exit!(1)
      end
    end
  end
end

# Where every thread is, on stderr, for an example that overran.
module ThreadDump
  # A run the watchdog ends writes no rspec results, and its dump is far from
  # a CI log's tail: .ci/run prints this file (where each thread was, a line
  # each) among its last lines.
  REPORT = File.expand_path("../tmp/hung-examples.txt", __dir__)

  def self.warn_all(example, what)
    Thread.list.each do |thread|
      warn "#{example.location} #{what}; #{thread.inspect}:\n  #{(thread.backtrace || []).first(25).join("\n  ")}"
    end
    $stderr.flush
  end

  # Each thread's name, status and innermost frames of this project's code.
  # @param where [RSpec::Core::Example, String] the example that hung, or what did
  def self.record(where)
    root = "#{File.expand_path("..", __dir__)}/"
    lines = (Thread.list - [Thread.current]).map do |thread|
      frames = (thread.backtrace || []).map { |frame| frame.delete_prefix(root) }.reject { |frame| frame.start_with?("/") }
      "  #{thread.name || "(unnamed)"} #{thread.status}: #{frames.first(6).join(" < ")}"
    end
    what = where.respond_to?(:location) ? where.location : where
    File.write(REPORT, "hung: #{what} (polling mode #{TestKafka::MODE})\n#{lines.join("\n")}\n", mode: "a")
  rescue StandardError => e
    warn "ThreadDump.record: #{e.message}"
  end
end
