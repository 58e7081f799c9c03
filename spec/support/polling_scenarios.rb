# frozen_string_literal: true

require "base64"
require "json"

# Helpers of the integration specs that run scenarios in processes of their own (polling/,
# lifecycle/close_from_callback_spec.rb, lifecycle/leaks_spec.rb, fork/, oauth/listener_refresh_spec.rb,
# consumer/own_process_spec.rb);
# groups include it explicitly (`include PollingScenarios`).
#
# Scenarios are Ruby files (spec/support/scenarios/<area>/, which rubocop reads) run by
# SpecHelpers#run_scenario_file in a process of their own. A group starts all of its scenarios at once
# in before(:context) (one thread per process, so they run in parallel) and each example asserts on
# one scenario's result: the Hash the script passed to `result(...)`.
module PollingScenarios
  # What a scenario process left behind.
  Outcome = Struct.new(:output, :status, :data, keyword_init: true) do
    def [](key) = data.fetch(key.to_s)
    def success? = status.success?
    def describe = "exit status #{status.inspect}, output:\n#{output}"
  end

  # A scenario file, spec/support/scenarios/<name>.rb, and its ARGV.
  ScenarioFile = Struct.new(:path, :args)

  def scenario_file(name, *args) = ScenarioFile.new(File.expand_path("scenarios/#{name}.rb", __dir__), args)

  # Starts every scenario (name => scenario_file) in its own process, all at once.
  def start_scenarios(timeout: 60, env: {}, **scenarios)
    scenarios.to_h do |name, scenario|
      thread = Thread.new { run_scenario_file(scenario.path, *scenario.args, timeout: timeout, env: env) }
      thread.report_on_exception = false
      [name, thread]
    end
  end

  # Waits for one started scenario; its `result` data is {} when it printed none.
  def scenario_outcome(threads, name)
    output, status = threads.fetch(name).value
    line = output.lines.reverse.find { |l| l.start_with?("SCENARIO-RESULT ") }
    data = line ? JSON.parse(line.delete_prefix("SCENARIO-RESULT ")) : {}
    Outcome.new(output: output, status: status, data: data)
  end

  # An unsigned JWT for Kafka's default (unsecured) OAUTHBEARER validator.
  def unsigned_jwt(subject, lifetime_s: 3600)
    now = Time.now.to_i
    encode = ->(hash) { Base64.urlsafe_encode64(JSON.generate(hash), padding: false) }
    "#{encode.call(alg: "none")}.#{encode.call(sub: subject, iat: now, exp: now + lifetime_s)}."
  end

  def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # Queue#pop bounded in time (Ruby 3.1's Queue#pop has no timeout), so a
  # missing event fails the example quickly instead of hanging it.
  def pop_within(queue, seconds = 5, what: "event")
    Timeout.timeout(seconds) { queue.pop }
  rescue Timeout::Error
    raise RSpec::Expectations::ExpectationNotMetError, "no #{what} within #{seconds}s"
  end

  # Spins (Thread.pass, no sleep) until the block is true; for states that
  # only a public reader exposes. Raises after `timeout` seconds.
  def spin_until(timeout: 10, what: "condition")
    deadline = monotonic + timeout
    until yield
      raise "#{what} not reached within #{timeout}s" if monotonic > deadline

      Thread.pass
    end
  end
end
