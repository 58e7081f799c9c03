# frozen_string_literal: true

# Consumer scenarios that need a process of their own (long waits on the
# group's timers, signals, fork, resource counts), all started at once in
# before(:context) so their waits overlap.
# What every consumer scenario script starts with (after PollingScenarios::PRELUDE).
module ConsumerScenarioScripts
  HELPERS = <<~'RUBY'
    def make_consumer(group: "sluice-spec-scenario-#{rand(1 << 30)}", **kafka)
      Sluice::Consumer.new do |config|
        config.kafka = { "bootstrap.servers": BROKERS, "group.id": group, "auto.offset.reset": "earliest" }.merge(kafka)
        config.polling.mode = MODE
        config.logger = Logger.new($stderr, level: Logger::ERROR)
      end
    end

    # Records name => payloads of the consumer's events.
    def record(consumer, *names)
      seen = Hash.new { |h, k| h[k] = [] }
      names.each { |name| consumer.monitor.subscribe(name) { |event| seen[name] << event.payload } }
      seen
    end

    def wait_for(seconds, what)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
      sleep 0.05 until yield || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      raise "no #{what} within #{seconds}s" unless yield
    end
  RUBY

  # librdkafka's floor for max.poll.interval.ms is session.timeout.ms.
  GROUP_TIMERS = '"session.timeout.ms": 6_000, "heartbeat.interval.ms": 1_000, "max.poll.interval.ms": 10_000'
end

RSpec.describe "Consumer scenarios in their own process", :kafka do
  include PollingScenarios

  before(:context) do
    # An idle consumer only waits on its fd: the waits must still count as polling.
    idle = <<~RUBY
      consumer = make_consumer(#{ConsumerScenarioScripts::GROUP_TIMERS})
      events = record(consumer, "consumer.partitions_assigned", "consumer.partitions_revoked", "error.occurred")
      consumer.subscribe("sluice-spec-idle")
      consumer.poll(200) until events["consumer.partitions_assigned"].any?
      member = Sluice::Native::TestHooks.member_id(consumer.native)
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      Thread.new { sleep 21; consumer.stop } # the application's own timer: 2 x max.poll.interval.ms idle
      consumer.each_message { raise "nothing is produced to sluice-spec-idle" }
      result(
        "idle_s" => Process.clock_gettime(Process::CLOCK_MONOTONIC) - started,
        "revoked" => events["consumer.partitions_revoked"].size,
        "errors" => events["error.occurred"].map { |e| e[:error].to_s },
        "same_member" => Sluice::Native::TestHooks.member_id(consumer.native) == member,
        "assignment" => consumer.assignment
      )
      consumer.close
    RUBY

    # A block that really runs longer than max.poll.interval.ms: reported, partitions given up.
    slow = <<~RUBY
      producer = make_producer
      report = producer.produce_sync(topic: "sluice-spec-slow", payload: "slow")
      consumer = make_consumer(#{ConsumerScenarioScripts::GROUP_TIMERS})
      events = record(consumer, "consumer.partitions_assigned", "consumer.partitions_revoked", "error.occurred")
      consumer.monitor.subscribe("consumer.partitions_revoked") { consumer.stop } # after the report, with the next reads
      Thread.new { sleep 40; consumer.stop }
      consumer.subscribe("sluice-spec-slow")
      blocked = nil
      consumer.each_message do |message|
        next if message.offset < report.offset || blocked

        started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        sleep 13 # the application stuck in its block beyond max.poll.interval.ms
        blocked = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
      end
      result(
        "blocked_s" => blocked,
        "errors" => events["error.occurred"].map { |e| e[:error].respond_to?(:code) ? e[:error].code.to_s : e[:error].to_s },
        "revoked" => events["consumer.partitions_revoked"].map { |e| e[:partitions] }
      )
      consumer.close
      producer.close
    RUBY

    trap_close = <<~RUBY
      consumer = make_consumer
      closed = record(consumer, "consumer.closed", "consumer.partitions_assigned")
      trap("TERM") { consumer.close }
      consumer.subscribe("sluice-spec-idle")
      Thread.new do
        sleep 0.05 until closed["consumer.partitions_assigned"].any?
        Process.kill("TERM", Process.pid)
      end
      consumer.each_message { nil }
      wait_for(10, "the close") { consumer.closed? }
      result("closed" => consumer.closed?, "closed_events" => closed["consumer.closed"].size)
    RUBY

    # A fork while a broker thread of the parent is inside getaddrinfo used to
    # leave glibc's resolver lock held in the child, whose next client then
    # never connected and hung in close (7 of 40 forks right after an assign
    # without sluice's fork-guarded resolver). Each fork here follows a fresh
    # consumer's assign, when its broker threads resolve; every close has a
    # watchdog, so a hang is counted instead of timing the scenario out.
    # From librdkafka 2.13 on, a broker thread also takes OpenSSL's random
    # generator lock at every connect (rd_jitter's seed), which sluice cannot
    # guard; under AddressSanitizer (bin/asan) its runtime's thread locks are
    # caught the same way. There the child creates no client of its own.
    forked = <<~RUBY
      #{PollingScenarios::FORK_HELPERS}
      def closes_in_time?(client) = Thread.new { client.close }.join(10) ? true : false
      own_client_unsafe =
        if Gem::Version.new(Sluice.librdkafka_version) >= Gem::Version.new("2.13")
          "librdkafka \#{Sluice.librdkafka_version} takes OpenSSL's lock at every connect: not fork-safe (README)"
        elsif ENV.fetch("LD_PRELOAD", "").include?("libasan")
          "AddressSanitizer's runtime locks, caught held by a fork, keep the child's new client from starting its threads"
        end

      children = Array.new(40) do
        parent = make_consumer
        parent.assign("sluice-spec-idle" => [0])
        child, status = in_child do
          error = begin
            parent.poll(10)
            "no error"
          rescue Sluice::Errors::BaseError => e
            e.class.name
          end
          parent.close # forgets the parent's handle, touches nothing of it
          outcome = { "error" => error, "inherited_closed" => parent.closed? }
          next outcome if own_client_unsafe

          own = make_consumer
          own.assign("sluice-spec-idle" => [0])
          own.poll(10)
          outcome.merge("own_closed" => closes_in_time?(own))
        end
        parent.poll(10)
        child.merge("exit" => status.exitstatus, "parent_works" => !parent.closed?, "parent_closed" => closes_in_time?(parent))
      end
      result("own_client_unsafe" => own_client_unsafe, "children" => children.tally.map { |outcome, count| outcome.merge("count" => count) })
    RUBY

    leaks = <<~RUBY
      producer = make_producer
      report = producer.produce_sync(topic: "sluice-spec-idle-reads", payload: "x")
      cycle = lambda do
        consumer = make_consumer
        consumer.assign("sluice-spec-idle-reads" => { 0 => report.offset })
        consumer.each_message { consumer.stop }
        consumer.close
      end
      rss = -> { File.read("/proc/self/status")[/VmRSS:\\s+(\\d+)/, 1].to_i }
      10.times { cycle.call }
      GC.start
      before = { "fds" => fds, "threads" => os_threads, "rss_kb" => rss.call }
      40.times { cycle.call }
      GC.start
      after = { "fds" => fds, "threads" => os_threads, "rss_kb" => rss.call }
      result("before" => before, "after" => after)
      producer.close
    RUBY

    @scenarios = start_scenarios(timeout: 90, idle: ConsumerScenarioScripts::HELPERS + idle, slow: ConsumerScenarioScripts::HELPERS + slow,
                                 trap_close: ConsumerScenarioScripts::HELPERS + trap_close, leaks: ConsumerScenarioScripts::HELPERS + leaks,
                                 forked: ConsumerScenarioScripts::HELPERS + forked)
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
