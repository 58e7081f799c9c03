# frozen_string_literal: true

# A consumer's close from a signal handler, racing other threads' calls, and
# with no broker to answer (issue 19, items 3, 7 and 9). Each scenario runs in
# a process of its own: a close that hangs or a librdkafka assertion must fail
# the example, not rspec.
RSpec.describe "Consumer close bounds", :kafka do
  include PollingScenarios

  def prelude_close = <<~'RUBY'
    TOPIC = "sluice-spec-close"
    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

    def make_consumer(brokers: BROKERS, max_wait_timeout: 10_000, **kafka)
      Sluice::Consumer.new do |config|
        config.kafka = { "bootstrap.servers": brokers, "group.id": "sluice-close-#{rand(1 << 30)}",
                         "auto.offset.reset": "earliest" }.merge(kafka)
        config.polling.mode = MODE
        config.max_wait_timeout = max_wait_timeout
        config.logger = Logger.new($stderr, level: Logger::FATAL)
      end
    end

    def produce_some(count)
      producer = make_producer
      count.times { |i| producer.produce_async(topic: TOPIC, partition: i % 3, payload: "close #{i}") }
    ensure
      producer&.close
    end
  RUBY

  before(:context) do
    @scenarios = start_scenarios(
      timeout: 40,
      # Item 3: the usual single-threaded worker; TERM arrives while it reads.
      trap_on_reader: prelude_close + <<~'RUBY',
        produce_some(3)
        consumer = make_consumer(max_wait_timeout: 5_000)
        trapped_at = nil
        trap("TERM") do
          trapped_at = now
          consumer.close
        end
        consumer.subscribe(TOPIC)
        consumer.each_message { Process.kill("TERM", Process.pid) unless trapped_at }
        result("closed" => consumer.closed?, "seconds" => now - trapped_at,
               "refused" => (begin; consumer.assignment; rescue Sluice::Errors::ConsumerClosedError; true; end))
      RUBY
      # Item 9: no broker answers. A commit and the commit inside close wait
      # at most their timeout; what could not be committed is reported.
      broker_down: prelude_close + <<~'RUBY',
        consumer = make_consumer(brokers: "127.0.0.1:1", max_wait_timeout: 2_000)
        errors = []
        consumer.monitor.subscribe("error.occurred") { |event| errors << event[:type] }
        consumer.assign(TOPIC => { 0 => 5 })
        started = now
        commit_error = begin
          consumer.commit(TOPIC => { 0 => 7 })
        rescue Sluice::Errors::ConsumerError => e
          e.message
        end
        commit_seconds = now - started
        message = Sluice::Message.new(TOPIC, 0, 9) # what each_message stores: the offset after it
        consumer.store_offset(message)
        started = now
        consumer.close(timeout: 2_000)
        result("commit_seconds" => commit_seconds, "commit_error" => commit_error, "close_seconds" => now - started,
               "closed" => consumer.closed?, "errors" => errors.uniq.sort - ["librdkafka.error"])
      RUBY
      # Item 7: close from three threads while others make group calls.
      close_race: prelude_close + <<~'RUBY'
        produce_some(30)
        rounds = Integer(ENV.fetch("SLUICE_CLOSE_ROUNDS", "12"))
        slowest = 0.0
        wrong = Hash.new(0)
        rounds.times do
          consumer = make_consumer(max_wait_timeout: 3_000)
          consumer.subscribe(TOPIC)
          reading = Queue.new
          reader = Thread.new { consumer.each_message { reading << true if reading.empty? } }
          reading.pop # partitions assigned, messages flowing
          stop = false
          calls = lambda do |&body|
            Thread.new do
              body.call until stop
            rescue Sluice::Errors::ConsumerClosedError
              nil
            rescue Sluice::Errors::BaseError => e
              wrong[e.class.name] += 1
              retry unless stop
            end
          end
          busy = [calls.call { consumer.commit; consumer.committed; consumer.assignment },
                  calls.call { consumer.assignment.each { |t, ps| ps.each { |p| consumer.pause(t, p); consumer.resume(t, p) } } }]
          started = now
          closers = Array.new(3) { Thread.new { consumer.close(timeout: 3_000) } }
          closers.each(&:join)
          slowest = [slowest, now - started].max
          stop = true
          (busy + [reader]).each { |t| t.join(10) or raise "a thread did not return after close" }
        end
        result("rounds" => rounds, "slowest" => slowest, "wrong_errors" => wrong)
      RUBY
    )
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
