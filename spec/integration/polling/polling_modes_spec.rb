# frozen_string_literal: true

# Behaviour both polling modes share, run in the mode under test
# (SLUICE_POLLING_MODE=fd|thread, TestKafka::MODE); the expectations that
# differ between the modes say so.
RSpec.describe "Polling in the mode under test", :kafka do
  include PollingScenarios

  let(:topic) { "sluice-spec-1p" }

  describe "many producers in a fresh process" do
    before(:context) do
      @scenarios = start_scenarios(many_producers: scenario_file("polling/many_producers"))
    end

    let(:outcome) { scenario_outcome(@scenarios, :many_producers) }

    if TestKafka::MODE == :fd
      it "polls 25 :fd producers from ONE poller thread, sluice.poller#0, and all of them deliver" do
        expect(outcome).to be_success, outcome.describe
        expect(outcome[:added]).to eq(1)
        expect(outcome[:added_names]).to eq(["sluice.poller#0"])
        expect(outcome[:poller]).to eq("count" => 25, "alive" => true)
        expect(outcome[:delivered]).to eq(25)
        expect(outcome[:offsets]).to eq(25)
        expect(outcome[:left_after_close]).to eq([])
      end
    else
      it "polls 25 :thread producers from 25 threads named sluice.producer#<id>, and all of them deliver" do
        expect(outcome).to be_success, outcome.describe
        expect(outcome[:added]).to eq(25)
        expect(outcome[:added_names]).to eq(outcome[:ids].map { |id| "sluice.producer##{id}" }.sort)
        expect(outcome[:poller]).to eq("count" => 0, "alive" => false) # the global poller is not involved
        expect(outcome[:delivered]).to eq(25)
        expect(outcome[:offsets]).to eq(25)
        expect(outcome[:left_after_close]).to eq([])
      end
    end
  end

  describe "thread priority" do
    it "starts polling threads with Sluice::Polling.thread_priority (WaterDrop's Polling.setup)" do
      Sluice::Polling.setup { |config| config.thread_priority = -2 }
      poller = Sluice::Polling::Poller.new if TestKafka::MODE == :fd # a thread started now
      producer = build_producer { |config| config.polling.poller = poller if poller }
      name = poller ? "sluice.poller##{poller.id}" : "sluice.producer##{producer.id}"
      expect(Thread.list.find { |thread| thread.name == name }&.priority).to eq(-2)
      expect { Sluice::Polling.thread_priority = "low" }.to raise_error(ArgumentError, /Integer/)
    ensure
      Sluice::Polling.thread_priority = 0
    end
  end

  describe "statistics" do
    # Events every 100 ms. The count alone proves little (a poll every second
    # would still drain ~10 queued events at once), so the gaps between
    # arrivals are checked too: every event must be dispatched soon after
    # librdkafka queues it — a pipe wake-up (:fd, periodic poll left at its
    # 1000 ms default) or the blocking wait (:thread), not the periodic poll.
    it "dispatches statistics.emitted as they are emitted, every ~100 ms" do
      arrivals = Queue.new
      monitor = Sluice::Monitor.new
      monitor.subscribe("statistics.emitted") { |event| arrivals << [monotonic, event.payload] }
      producer = build_producer(kafka: { "statistics.interval.ms": 100 }, monitor: monitor) do |config|
        expect(config.polling.fd.periodic_poll_interval).to eq(1_000)
      end
      poller = Sluice::Polling::Poller.instance
      wakeups_before = poller.stats[:wakeups]

      first, payload = pop_within(arrivals, what: "statistics.emitted")
      times = [first]
      times << pop_within(arrivals, 2, what: "statistics.emitted").first while times.last - first < 3.0

      gaps = times.each_cons(2).map { |a, b| b - a }
      expect(times.size).to be >= 20
      # Room for a loaded machine's pauses, still under the 1 s gap.
      expect_elapsed(gaps.max, within: 0.8, guards: "the 1 s periodic poll: events drained only by it")
      expect(payload[:producer_id]).to eq(producer.id)
      expect(payload[:statistics]).to include("type" => "producer", "name" => a_kind_of(String))
      expect(poller.stats[:wakeups] - wakeups_before).to be >= 20 if TestKafka::MODE == :fd
    end

    # Parsed and announced on their own thread (Polling::StatisticsThread):
    # in :fd mode a listener on the poller would hold up every client of it.
    it "runs statistics.emitted listeners off the polling threads: one that waits holds up no delivery" do
      entered = Queue.new
      release = Queue.new
      monitor = Sluice::Monitor.new
      waited = false
      monitor.subscribe("statistics.emitted") do
        next if waited

        waited = true
        entered << Thread.current.name
        release.pop
      end
      stats_producer = build_producer(kafka: { "statistics.interval.ms": 100 }, monitor: monitor, max_wait_timeout: 5_000)
      other = build_producer(max_wait_timeout: 5_000)
      expect(pop_within(entered, what: "statistics.emitted")).to eq(Sluice::Polling::StatisticsThread::NAME)
      # Both delivered while the listener waits (the poller serves them meanwhile), newer emissions replace the waiting one.
      expect([stats_producer, other].map { |producer| producer.produce_sync(topic: topic, payload: "while stats wait").error }).to eq([nil, nil])
      expect(Sluice::Polling::StatisticsThread.instance.waiting).to be <= 2
    ensure
      release << true
    end
  end

  # Listeners run on the polling thread (the shared poller in :fd mode): a
  # call that waits for a delivery there waits for the very thread it blocks.
  describe "waiting for deliveries inside a listener" do
    let(:producer) { build_producer(max_wait_timeout: 2_000) }
    let(:bystander) { build_producer(max_wait_timeout: 2_000) }
    let(:outcomes) { Queue.new }

    before { [producer, bystander].each { |p| p.produce_sync(topic: topic, payload: "warm-up") } }

    def on_trigger(&block)
      producer.monitor.subscribe("message.acknowledged") do |event|
        next unless event[:label] == :trigger

        outcomes << begin
          block.call
        rescue StandardError => e
          e
        end
      end
      producer.produce_async(topic: topic, payload: "trigger", label: :trigger)
    end

    it "lets the listener flush its producer: flush returns true once the follow-up is delivered" do
      follow_up = nil
      on_trigger do
        follow_up = producer.produce_async(topic: topic, payload: "follow-up")
        producer.flush(2_000)
      end

      expect(pop_within(outcomes, what: "the listener's flush")).to be(true)
      expect(follow_up.report).to have_attributes(error: nil)
    end

    # A regression (fixed in da71e67): produce_sync on the polling thread waited for a report only that
    # thread could serve, timed out and, in :fd mode, stalled every producer of the poller.
    it "lets the listener produce_sync a follow-up message without stalling the polling thread", :aggregate_failures do
      on_trigger { producer.produce_sync(topic: topic, payload: "follow-up") }
      guards = "the listener's produce_sync timing out (max_wait_timeout 2 s) with the polling thread stalled"
      bystander_report = expect_within(1, guards: guards) do
        bystander.produce_sync(topic: topic, payload: "bystander")
      rescue Sluice::Errors::WaitTimeoutError => e
        e
      end

      expect(pop_within(outcomes, 5, what: "the listener's produce_sync")).to be_a(Sluice::Delivery::Report)
      expect(bystander_report).to be_a(Sluice::Delivery::Report)
    end
  end

  describe "a raising listener" do
    let(:errors) { Queue.new }
    let(:raising) do
      monitor = Sluice::Monitor.new
      monitor.subscribe("error.occurred") { |event| errors << event.payload }
      build_producer(monitor: monitor, max_wait_timeout: 3_000)
    end
    let(:bystander) { build_producer(max_wait_timeout: 3_000) }

    before do
      # Both connected and warm, so a delivery takes milliseconds.
      [raising, bystander].each { |producer| producer.produce_sync(topic: topic, payload: "warm-up") }
    end

    it "is reported as error.occurred and the poller keeps serving every producer" do
      raising.monitor.subscribe("message.acknowledged") { |_event| raise ArgumentError, "listener broke" }

      first = raising.produce_sync(topic: topic, payload: "raises")
      error = pop_within(errors, what: "error.occurred")
      expect(error).to include(producer_id: raising.id, type: "callbacks.listener.error", event_id: "message.acknowledged")
      expect(error[:error]).to be_a(ArgumentError).and(have_attributes(message: "listener broke"))

      expect(bystander.produce_sync(topic: topic, payload: "bystander").error).to be_nil
      second = raising.produce_sync(topic: topic, payload: "raises again")
      expect(second.offset).to be > first.offset
      expect(pop_within(errors, what: "error.occurred")[:error].message).to eq("listener broke")
    end

    def polling_threads
      names = TestKafka::MODE == :fd ? ["sluice.poller#0"] : [raising, bystander].map { |p| "sluice.producer##{p.id}" }
      Thread.list.select { |thread| thread.alive? && names.include?(thread.name) }
    end

    # Monitor promises a raising listener "never stops polling", whatever it
    # raises. A ScriptError such as NotImplementedError is no StandardError; it
    # used to end the polling thread (fixed), and so did exit and NoMemoryError
    # (issue 11, item 6).
    [[NotImplementedError, -> { raise NotImplementedError, "not yet" }], [SystemExit, -> { exit(3) }],
     [NoMemoryError, -> { raise NoMemoryError, "listener ran out" }]].each do |error_class, fault|
      it "is reported as error.occurred when it raises #{error_class}, and polling goes on for every producer" do
        threads = polling_threads
        raising.monitor.subscribe("message.acknowledged") { |_event| fault.call }

        first = raising.produce_sync(topic: topic, payload: "raises #{error_class}")
        error = pop_within(errors, what: "error.occurred")

        expect(error).to include(producer_id: raising.id, type: "callbacks.listener.error", event_id: "message.acknowledged")
        expect(error[:error]).to be_a(error_class)
        expect(bystander.produce_sync(topic: topic, payload: "bystander").error).to be_nil
        expect(raising.produce_sync(topic: topic, payload: "again").offset).to be > first.offset
        expect(pop_within(errors, what: "the second error.occurred")[:error]).to be_a(error_class)
        expect(polling_threads).to eq(threads) # the same threads, still alive
        expect(threads.size).to eq(TestKafka::MODE == :fd ? 1 : 2)
      ensure
        # Were a polling thread dead, :thread mode's close would re-raise its
        # error from Thread#join (and again in the suite's after hook): close here, once.
        test_producers.dup.each do |producer|
          producer.close(timeout: 3_000)
        rescue Exception # rubocop:disable Lint/RescueException
          test_producers.delete(producer)
        end
      end
    end
  end
end
