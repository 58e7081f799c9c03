# frozen_string_literal: true

require "securerandom"

# The :fd polling engine itself (Sluice::Polling::Poller): these examples pin
# mode :fd, so they run in the :fd pass only (bin/test runs both passes).
RSpec.describe "FD poller (config.polling.mode = :fd)", :kafka, skip: (TestKafka::MODE != :fd && "the :fd engine: runs in the :fd pass") do
  include PollingScenarios

  let(:topic) { "sluice-spec-1p" }

  def fd_producer(poller: nil, periodic_poll_interval: nil, **settings)
    build_producer(mode: :fd, **settings) do |config|
      config.polling.poller = poller if poller
      config.polling.fd.periodic_poll_interval = periodic_poll_interval if periodic_poll_interval
      yield config if block_given?
    end
  end

  describe "the global poller's lifecycle, in a fresh process" do
    before(:context) do
      @scenarios = start_scenarios(lifecycle: scenario_file("polling/poller_lifecycle"))
    end

    let(:outcome) { scenario_outcome(@scenarios, :lifecycle) }

    it "is Poller.instance with id 0, idle until the first producer, then one thread named sluice.poller#0" do
      expect(outcome).to be_success, outcome.describe
      expect(outcome[:id]).to eq(0)
      expect(outcome[:idle]).to eq([false, 0])
      expect(outcome[:idle_threads]).to eq([])
      expect(outcome[:with_two]).to eq([true, 2])
      expect(outcome[:threads_with_two]).to eq(["sluice.poller#0"])
      expect(outcome[:delivered]).to eq([true, true])
    end

    it "counts producers down on close and stops its thread as soon as the last close returns" do
      expect(outcome).to be_success, outcome.describe
      expect(outcome[:after_first_close]).to eq([true, 1])
      expect(outcome[:after_last_close]).to eq([false, 0])
      expect(outcome[:threads_after_last_close]).to eq([])
    end

    it "starts again for a new producer, which delivers, and stops again after it" do
      expect(outcome).to be_success, outcome.describe
      expect(outcome[:same_instance]).to be(true)
      expect(outcome[:restarted]).to eq([true, 1])
      expect(outcome[:restart_delivered]).to be(true)
      expect(outcome[:threads_restarted]).to eq(["sluice.poller#0"])
      expect(outcome[:final]).to eq([false, 0])
      expect(outcome[:threads_final]).to eq([])
    end
  end

  # Periodic polls every 10 s: a delivery within 2 s must come from the
  # registration taking effect at once (the poller's wait is interrupted) and
  # from the pipe. A dedicated poller, so no other producer shortens the
  # periodic interval, with a first producer already served (so the first
  # iteration's periodic poll is behind us).
  describe "a newly registered producer" do
    let(:poller) { Sluice::Polling::Poller.new }

    before do
      warm = fd_producer(poller: poller, periodic_poll_interval: 10_000)
      warm.produce_sync(topic: topic, payload: "warm-up")
    end

    it "is polled at once: its first produce_sync completes long before the next periodic poll" do
      fresh = fd_producer(poller: poller, periodic_poll_interval: 10_000)
      # Under the wait's own 5 s: had it waited that long, it would have raised WaitTimeoutError.
      report = expect_within(5, guards: "the next periodic poll, 10 s away") do
        fresh.produce_async(topic: topic, payload: "first").wait(max_wait_timeout: 5_000)
      end

      expect(report.error).to be_nil
      expect(poller.count).to eq(2)
    end

    # librdkafka writes to the wake-up pipe only when its queue goes from empty
    # to non-empty: events queued before the pipe existed (here: debug log
    # lines from rd_kafka_new) never wake the poller, so it must serve the
    # producer once on registration.
    it "is served once on registration, so events queued before its pipe existed do not block its wake-ups" do
      chatty = fd_producer(poller: poller, periodic_poll_interval: 10_000, kafka: { debug: "generic,broker" },
                           logger: Logger.new(File::NULL))
      report = chatty.produce_async(topic: topic, payload: "after debug logs").wait(max_wait_timeout: 2_000)

      expect(report.error).to be_nil
    end
  end

  # periodic_poll_interval: "how often every producer is polled even when its
  # pipe is silent". A poller polls at the shortest interval of its producers.
  # A regression (fixed in da71e67): a shorter interval waited for the longer one's next poll.
  it "applies a newly registered producer's shorter periodic_poll_interval at once" do
    poller = Sluice::Polling::Poller.new
    fd_producer(poller: poller, periodic_poll_interval: 10_000).produce_sync(topic: topic, payload: "warm-up")
    periodic_polls = poller.stats[:periodic_polls]

    fd_producer(poller: poller, periodic_poll_interval: 100)

    # ~100 ms apart; spinning on the public counter, for at most 1.5 s
    expect { spin_until(timeout: 1.5, what: "3 periodic polls") { poller.stats[:periodic_polls] >= periodic_polls + 3 } }
      .not_to raise_error
  end

  # Issue 44 item 4: idle clients' periodic polls are batched. 100 producers
  # registered one after another have due times spread over their 200 ms
  # interval; one wake-up serves every client due within the batch window
  # (50 ms here), so the poller wakes a few times per interval, not once per
  # client (which was ~100 times per interval before the Schedule).
  it "batches idle producers' periodic polls: a few wake-ups per interval, however many producers" do
    poller = Sluice::Polling::Poller.new
    Array.new(100) { fd_producer(poller: poller, periodic_poll_interval: 200) }
    before = poller.stats
    window = 2.0
    sleep(window) # the window measured, not a wait for an event
    after = poller.stats

    intervals = window / 0.2
    expect(after[:periodic_polls] - before[:periodic_polls]).to be <= (intervals * 5) # window 50 ms: at most ~4 per interval
    expect(after[:periodic_polls] - before[:periodic_polls]).to be >= intervals - 1 # and they still happen
  end

  # The residual idle cost was the GC: ~11 objects per periodic poll of each
  # client (heap entries, swaps, drain's empty batch) made the poller thread
  # collect, and every GC step reads the process CPU time, which walks all of
  # librdkafka's threads. An idle client's periodic poll now allocates nothing.
  it "allocates nothing per idle producer's periodic poll" do
    poller = Sluice::Polling::Poller.new
    Array.new(100) { fd_producer(poller: poller, periodic_poll_interval: 200) }
    sleep(0.5) # past the registrations' own allocations
    allocated = GC.stat(:total_allocated_objects)
    sleep(2.0) # ~1,000 periodic polls of idle producers
    expect(GC.stat(:total_allocated_objects) - allocated).to be < 200 # was ~11,000
  end

  # polling.fd.max_time: "how long one producer may be drained per wake-up";
  # a producer with events left is re-signalled "so the others get their
  # turn". The busy producer's listener costs 0.1 ms per message (CPU work is
  # the point here), so its 5,000 reports take ~0.5 s to dispatch; with a 1 ms
  # turn the bystander on the same poller must not wait for all of them.
  # A regression (fixed in da71e67): max_time bounded the drain but not the dispatch, where user code runs.
  it "bounds a busy producer's turn by max_time, so a bystander on the same poller is served meanwhile" do
    poller = Sluice::Polling::Poller.new
    busy = fd_producer(poller: poller, periodic_poll_interval: 10_000) { |config| config.polling.fd.max_time = 1 }
    bystander = fd_producer(poller: poller, periodic_poll_interval: 10_000)
    [busy, bystander].each { |producer| producer.produce_sync(topic: topic, payload: "warm-up") }
    dispatching = Queue.new
    acknowledged = 0
    busy.monitor.subscribe("message.acknowledged") do |_event|
      dispatching << true if (acknowledged += 1) == 1
      spin_from = monotonic
      nil while monotonic - spin_from < 0.0001
    end

    handles = busy.produce_many_async(Array.new(5_000) { |i| { topic: topic, payload: "busy #{i}" } })
    pop_within(dispatching, what: "the busy producer's first report")
    report = bystander.produce_sync(topic: topic, payload: "bystander")
    # Listeners not run yet when the bystander got its report (a handle is
    # resolved by the drain in C, before its listeners run: pending? says less).
    busy_left = 5_000 - acknowledged

    expect(report.error).to be_nil
    expect(handles.map { |handle| handle.wait.error }.uniq).to eq([nil])
    # Served while the busy producer still had reports to hand out: its turn
    # was cut at max_time (a wall-clock bound here would measure the machine).
    expect(busy_left).to be > 0
  end

  describe "a dedicated poller (config.polling.poller = Sluice::Polling::Poller.new)" do
    let(:dedicated) { Sluice::Polling::Poller.new }
    let(:registrations) { Queue.new }
    let(:acks) { Queue.new }
    let(:monitor) do
      Sluice::Monitor.new.tap do |m|
        m.subscribe("poller.producer_registered") { |e| registrations << [e.payload, Thread.current.name] }
        m.subscribe("message.acknowledged") { |e| acks << [e[:producer_id], Thread.current.name] }
      end
    end

    it "has its own id and thread sluice.poller#<id>, and serves only its own producers" do
      global = Sluice::Polling::Poller.instance
      global_before = global.count
      unused = Sluice::Polling::Poller.new
      mine = Array.new(2) { fd_producer(poller: dedicated, monitor: monitor) }
      outsider = fd_producer # the global poller

      expect(dedicated.id).not_to eq(0)
      expect(unused.id).not_to eq(dedicated.id)
      thread_name = "sluice.poller##{dedicated.id}"

      registered = Array.new(2) { pop_within(registrations, what: "poller.producer_registered") }
      expect(registered.map(&:first)).to contain_exactly({ producer_id: mine[0].id, poller_id: dedicated.id },
                                                         { producer_id: mine[1].id, poller_id: dedicated.id })
      expect(registered.map(&:last)).to eq([thread_name, thread_name])
      expect(dedicated.count).to eq(2)
      expect(global.count).to eq(global_before + 1) # the outsider only
      expect([unused.count, unused.alive?]).to eq([0, false])
      expect(Thread.list.map(&:name)).to include(thread_name, "sluice.poller#0")

      (mine + [outsider]).each { |producer| producer.produce_sync(topic: topic, payload: producer.id) }
      served = Array.new(2) { pop_within(acks, what: "message.acknowledged") }
      expect(served).to contain_exactly([mine[0].id, thread_name], [mine[1].id, thread_name])

      mine.each(&:close)
      expect([dedicated.count, dedicated.alive?]).to eq([0, false])
      expect(Thread.list.select(&:alive?).map(&:name)).not_to include(thread_name)
      expect(outsider.produce_sync(topic: topic, payload: "still served").error).to be_nil
    end

    it "is refused in :thread mode, and the refused producer leaves it untouched" do
      expect do
        build_producer(mode: :thread) { |config| config.polling.poller = dedicated }
      end.to raise_error(Sluice::Errors::ConfigurationInvalidError, /polling\.poller/)
      expect([dedicated.count, dedicated.alive?]).to eq([0, false])
    end

    # The sleeping listener is the point, not synchronisation: it holds poller
    # P1's thread for 500 ms. P2's producer must not notice.
    it "isolates its producers from a slow listener on another poller" do
      slow = fd_producer(poller: Sluice::Polling::Poller.new)
      fast = fd_producer(poller: Sluice::Polling::Poller.new)
      [slow, fast].each { |producer| producer.produce_sync(topic: topic, payload: "warm-up") }
      listener_started = Queue.new
      listener_finished = Queue.new
      slow.monitor.subscribe("message.acknowledged") do |_event|
        listener_started << true
        sleep 0.5
        listener_finished << true
      end

      slow.produce_async(topic: topic, payload: "slow")
      pop_within(listener_started, what: "the slow listener")
      report = fast.produce_sync(topic: topic, payload: "fast")

      expect(report.error).to be_nil
      expect(listener_finished).to be_empty # delivered while P1 was still stuck in the listener
      pop_within(listener_finished, what: "the slow listener's end")
    end
  end

  # Two producers of a poller of their own close: the first one's
  # unregistration is held in a poller.producer_unregistered listener (it runs
  # inside the poller's command loop) until `release` gets an item, and the
  # last one's is queued meanwhile (the count already 0).
  # @return [Hash] :poller, :holder, :last and their closing threads
  def hold_unregistration(release)
    poller = Sluice::Polling::Poller.new
    in_listener = Queue.new
    holding = Sluice::Monitor.new
    holding.subscribe("poller.producer_unregistered") do |_event|
      in_listener << true
      release.pop
    end
    holder = fd_producer(poller: poller, monitor: holding)
    last = fd_producer(poller: poller)
    last.produce_sync(topic: topic, payload: "warm-up")

    holder_closer = Thread.new { holder.close }
    pop_within(in_listener, what: "the holding listener") # the poller thread is held; `last` is its only producer
    last_closer = Thread.new { last.close }
    spin_until(what: "the close queued its unregistration") { poller.count.zero? }
    { poller: poller, holder: holder, last: last, holder_closer: holder_closer, last_closer: last_closer }
  end

  # A regression (fixed in da71e67). Deterministic: a new registration is
  # queued too, so the next command loop applies it and the last
  # unregistration in one batch.
  it "serves a producer registered while the poller's last producer is being unregistered" do
    release = Queue.new
    held = hold_unregistration(release)
    poller = held[:poller]
    arriving = Thread.new { fd_producer(poller: poller, max_wait_timeout: 3_000) } # returns once registered
    spin_until(what: "the registration queued") { poller.count == 1 }
    release << true
    held.values_at(:holder_closer, :last_closer).each(&:join)
    newcomer = arriving.value

    expect(held.values_at(:holder, :last)).to all(be_closed)
    expect([poller.count, poller.alive?]).to eq([1, true])
    expect(newcomer.produce_sync(topic: topic, payload: "newcomer").error).to be_nil
  ensure
    release&.push(true)
    [*held&.values_at(:holder_closer, :last_closer), arriving].each { |thread| thread&.join }
  end

  # A regression: CI's cluster run once hung in a consumer's close (its
  # unregistration never applied). Deterministic: the thread must apply the
  # last unregistration before it stops, not stop on a count already at 0.
  it "applies the last client's unregistration queued while the one before it was being applied" do
    release = Queue.new
    held = hold_unregistration(release)
    release << true

    expect(held[:holder_closer].join(10)).to be(held[:holder_closer])
    unless held[:last_closer].join(10)
      # Nothing would ever apply it: the after hooks' and the at_exit close would wait too.
      warn "the last close never returned: its unregistration was left queued and the poller stopped; ending the run"
      exit!(1)
    end
    expect(held.values_at(:holder, :last)).to all(be_closed)
    expect(held[:poller].alive?).to be(false)
  ensure
    release&.push(true)
  end

  describe "special producers" do
    it "runs a transactional producer: the committed message is visible to read_committed" do
      producer = fd_producer(kafka: { "transactional.id": "sluice-fd-poller-#{SecureRandom.hex(4)}" })
      payload = "fd-txn-#{SecureRandom.hex(4)}"

      report = producer.transaction { producer.produce_sync(topic: "sluice-spec-txn", payload: payload) }

      expect(report.error).to be_nil
      message = consume(report.topic, report.partition, report.offset, 1, isolation: "read_committed").first
      expect(message).to include(payload: payload)
    end

    it "runs an idempotent producer: reports in produce order, with increasing offsets" do
      producer = fd_producer(kafka: { "enable.idempotence": true })
      payloads = Array.new(10) { |i| "idem-#{i}-#{SecureRandom.hex(3)}" }

      reports = producer.produce_many_sync(payloads.map { |payload| { topic: topic, payload: payload } })

      expect(reports.map(&:error)).to all(be_nil)
      expect(reports.map(&:offset)).to eq(reports.map(&:offset).sort)
      expect(reports.map(&:offset).uniq.size).to eq(10)
      expect(consume_reports(reports).map { |m| m[:payload] }).to eq(payloads)
    end
  end
end
