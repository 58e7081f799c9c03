# frozen_string_literal: true

require "async" # Debian's ruby-async (1.30): Async::Scheduler is a Fiber.scheduler
require "securerandom"

# Delivery::Handle#wait parks on a Mutex + ConditionVariable that the polling
# thread broadcasts; under a Fiber.scheduler that wait must suspend only the
# waiting fiber. linger.ms = 200 makes every delivery take >= 200 ms, so a
# wait that blocked the thread would serialise the fibers (20 x 200 ms) and
# freeze the ticker fiber meanwhile.
RSpec.describe "Waiting for deliveries under a fiber scheduler (async)", :kafka do
  include PollingScenarios

  let(:topic) { "sluice-spec-1p" }
  let(:producer) do
    build_producer(kafka: { "linger.ms": 200 }).tap do |warm|
      warm.produce_sync(topic: topic, payload: "warm-up") # connection and topic metadata are ready
    end
  end

  # Runs the block in an Async reactor next to a fiber that records a
  # timestamp every 5 ms; returns [block's value, tick times].
  def with_ticker
    ticks = []
    value = nil
    Async do |task|
      ticker = task.async do
        loop do
          ticks << monotonic
          sleep 0.005
        end
      end
      value = yield task
    ensure
      ticker&.stop
    end.wait # re-raises what failed inside
    expect(Fiber.scheduler).to be_nil # the reactor cleaned up after itself
    [value, ticks]
  end

  it "completes 20 fibers' produce_sync concurrently while another fiber keeps ticking" do
    producer
    runs, ticks = expect_within(3, guards: "20 waits one after the other (20 x the 200 ms linger: >= 4 s)") do
      with_ticker do |task|
        Array.new(20) do |i|
          task.async do
            began = monotonic
            report = producer.produce_sync(topic: topic, payload: "fiber #{i}")
            { began: began, ended: monotonic, report: report }
          end
        end.map(&:wait)
      end
    end

    expect(runs.map { |run| run[:report].error }).to eq([nil] * 20)
    last_start = runs.map { |run| run[:began] }.max
    first_end = runs.map { |run| run[:ended] }.min
    expect(last_start).to be < first_end # every fiber was waiting at once
    expect(ticks.count { |t| t > last_start && t < first_end }).to be >= 10 # and the thread was free meanwhile
  end

  it "lets produce_async + Delivery::Handle#wait on many messages yield to other fibers" do
    producer
    (waited_from, waited_until, reports), ticks = with_ticker do
      handles = Array.new(200) { |i| producer.produce_async(topic: topic, payload: "batch #{i}") }
      from = monotonic
      reports = handles.map(&:wait)
      [from, monotonic, reports]
    end

    expect(reports.map(&:error)).to all(be_nil)
    expect_elapsed(waited_until - waited_from, at_least: 0.1, guards: "waits that returned before the 200 ms linger: nothing to yield through")
    expect(ticks.count { |t| t > waited_from && t < waited_until }).to be >= 10
  end

  it "times a wait out after max_wait_timeout without blocking the thread; the handle can be waited on again" do
    producer
    outcome, ticks = with_ticker do
      handle = producer.produce_async(topic: topic, payload: "waited on twice")
      from = monotonic
      error = begin
        handle.wait(max_wait_timeout: 50)
      rescue Sluice::Errors::WaitTimeoutError => e
        e
      end
      timed_out_at = monotonic
      pending = handle.pending?
      { from: from, timed_out_at: timed_out_at, error: error, pending: pending, report: handle.wait, handle: handle }
    end

    expect(outcome[:error]).to be_a(Sluice::Errors::WaitTimeoutError).and(have_attributes(handle: outcome[:handle]))
    # No upper bound: had the wait ignored its 50 ms, it would have returned the report at the 200 ms linger, not raised.
    expect_elapsed(outcome[:timed_out_at] - outcome[:from], at_least: 0.04, guards: "timing out before max_wait_timeout (50 ms)")
    expect(outcome[:pending]).to be(true)
    expect(ticks.count { |t| t > outcome[:from] && t < outcome[:timed_out_at] }).to be >= 3
    expect(outcome[:report].error).to be_nil
  end
end

# The producer's long native waits — flush, close, a transaction commit, the
# metadata lookup of the first partition_key — must suspend only the calling
# fiber under a Fiber.scheduler (Sluice::Shared::Blocking runs them off the fiber's
# thread). They used to block the whole thread: a fiber ticking every 10 ms
# ticked 0 times during a flush, once during close (issue 11, item 2).
#
# Each call is made to last (an unreachable broker, or one message per
# request) and a ticker fiber must tick for at least half of the 10 ms slots
# of the call's duration.
RSpec.describe "Long producer calls under a fiber scheduler (async)", :kafka do
  include PollingScenarios

  let(:topic) { "sluice-spec-many" }

  def tick = 0.01

  # Runs the block in an Async reactor next to a fiber ticking every tick s;
  # returns the ticks counted while the block ran (or from `from`, a Proc
  # giving a time within the run), and how long that was.
  def ticks_during(from: nil)
    ticks = []
    started = finished = nil
    Async do |task|
      ticker = task.async do
        loop do
          ticks << monotonic
          sleep tick
        end
      end
      task.yield # the ticker is running
      started = monotonic
      yield
      finished = monotonic
    ensure
      ticker&.stop
    end.wait
    expect(Fiber.scheduler).to be_nil
    started = from.call if from
    { ticks: ticks.count { |t| t > started && t < finished }, elapsed: finished - started }
  end

  def expect_ticking(outcome, at_least:)
    expect_elapsed(outcome[:elapsed], at_least: at_least, guards: "a call that returned at once: nothing to tick through")
    expect(outcome[:ticks]).to be >= (outcome[:elapsed] / tick * 0.5).floor, "ticks: #{outcome.inspect}"
  end

  # Nothing listens there: queued messages stay queued, metadata never comes.
  def stuck_producer(**settings) = build_producer(kafka: { "bootstrap.servers": SpecHelpers::UNREACHABLE }, **settings)

  it "keeps other fibers running during flush" do
    producer = stuck_producer
    producer.produce_async(topic: topic, payload: "stuck")
    flushed = nil
    outcome = ticks_during { flushed = producer.flush(800) }

    expect(flushed).to be(false)
    expect_ticking(outcome, at_least: 0.7)
    producer.close! # nothing would ever be delivered
  end

  it "keeps other fibers running during close" do
    producer = stuck_producer
    handle = producer.produce_async(topic: topic, payload: "stuck")
    outcome = ticks_during { producer.close(timeout: 800) }

    expect(producer).to be_closed
    expect(handle.error&.code).to eq(:purge_queue)
    expect_ticking(outcome, at_least: 0.7)
  end

  # The commit waits for every message of the transaction: one per request,
  # one request in flight, makes thousands of them take a while. How long
  # depends on the broker's load: 5,000 took 0.15 s against an idle broker
  # (CI's Debian 13 root, beside nothing else), too short to tick through,
  # so a commit that short is done again with four times as many messages.
  it "keeps other fibers running during a transaction commit" do
    producer = build_producer(kafka: { "transactional.id": "sluice-fiber-#{SecureRandom.hex(4)}", "batch.num.messages": 1,
                                       "max.in.flight.requests.per.connection": 1 })
    producer.transaction { producer.produce_async(topic: topic, payload: "warm-up") } # init_transactions is behind us
    outcome = nil
    [5_000, 20_000, 80_000].each do |count|
      handles = nil
      committing_at = nil
      outcome = ticks_during(from: -> { committing_at }) do
        handles = producer.transaction do
          Array.new(count) { |i| producer.produce_async(topic: topic, payload: "txn #{i}") }.tap { committing_at = monotonic }
        end
      end
      expect(handles.map { |h| h.wait.error }.uniq).to eq([nil])
      break if outcome[:elapsed] >= 0.25
    end

    expect_ticking(outcome, at_least: 0.25)
  end

  it "keeps other fibers running during the first partition_key lookup (a metadata round trip)" do
    producer = stuck_producer(max_wait_timeout: 800)
    error = nil
    outcome = ticks_during do
      producer.produce_async(topic: topic, payload: "keyed", partition_key: "k")
    rescue Sluice::Errors::ProduceError => e
      error = e
    end

    expect(error).to be_a(Sluice::Errors::ProduceError), outcome.inspect
    expect_ticking(outcome, at_least: 0.7)
  end
end

# Consumers wait on their queue's pipe with IO#wait_readable: under a fiber
# scheduler each read suspends its fiber only. (Here rather than in
# consumer_spec.rb: this is the one spec file that needs the async gem.)
RSpec.describe "Consumers under a fiber scheduler (async)", :kafka do
  include PollingScenarios

  let(:topic) { "sluice-spec-consumer" }
  let(:producer) { build_producer }

  def build_consumer = super("auto.offset.reset": "earliest")

  # Reads with each_message until a message came; how many came (1).
  def read_one(consumer)
    seen = 0
    consumer.each_message do
      seen += 1
      consumer.stop
    end
    seen
  end

  it "runs 25 consumers as 25 fibers in one thread under Async, with no thread of ours per consumer" do
    reports = Array.new(25) { |i| producer.produce_sync(topic: topic, partition: i % 3, payload: "f#{i}") }
    threads_before = Thread.list.size
    counts = []
    threads_during = nil
    Async do |task|
      consumers = reports.map do |report|
        build_consumer.tap { |c| c.assign(topic => { report.partition => report.offset }) }
      end
      threads_during = Thread.list.size
      consumers.map { |consumer| task.async { counts << read_one(consumer) } }.each(&:wait)
    end
    expect(counts).to eq([1] * 25)
    # :fd: at most the shared poller's thread; :thread, the baseline: one polling thread per consumer
    expect(threads_during - threads_before).to(TestKafka::MODE == :fd ? be <= 1 : eq(25))
  end
end

# An admin call's native wait runs off the fiber's thread (Sluice::Shared::Blocking).
RSpec.describe "Admin calls under a fiber scheduler (async)", :kafka do
  include PollingScenarios

  let(:topic) { "sluice-spec-admin-fiber-#{Process.pid}-#{rand(1 << 30)}" }
  let(:admin) do
    Sluice::Admin.new do |config|
      config.kafka = { "bootstrap.servers": TestKafka::BROKERS }
      config.polling.mode = TestKafka::MODE
      config.logger = Logger.new(nil)
    end
  end

  after do
    admin.delete_topic(topic)
  rescue Sluice::Errors::UnknownTopicError
    nil
  ensure
    admin.close
  end

  it "lets another fiber run while one awaits an admin call" do
    admin.topics # connected: the calls below wait for the broker only
    order = []
    Async do |task|
      caller = task.async do
        order << :call_started
        admin.create_topic(topic)
        admin.describe_topic(topic) # a blocking call of the handle: on a helper thread, the fiber waits
        order << :call_returned
      end
      task.async { order << :other_fiber_ran }
      caller.wait
    end.wait
    expect(order).to eq(%i[call_started other_fiber_ran call_returned])
  end
end
