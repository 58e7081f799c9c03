# frozen_string_literal: true

RSpec.describe "FD polling: one poller thread for many producers", :kafka do
  let(:topic) { "sluice-spec-1p" }
  let(:poller) { Sluice::Polling::Poller.instance }

  it "serves 25 producers from one thread (thread mode: 25 threads) and all deliver" do
    out, status = run_scenario(<<~RUBY)
      before = Thread.list.size
      producers = Array.new(25) do |i|
        Sluice::Producer.new { |c| c.kafka = { "bootstrap.servers": BROKERS }; c.polling.mode = MODE; c.id = "p\#{i}" }
      end
      delivered = producers.count { |p| p.produce_sync(topic: "sluice-spec-1p", payload: "x").error.nil? }
      names = Thread.list.map(&:name).compact.grep(/sluice/).uniq
      puts [Thread.list.size - before, delivered, names.size, names.first].inspect
      producers.each(&:close)
    RUBY

    added, delivered, distinct_names, name = eval(out.lines.last) # rubocop:disable Security/Eval
    expect(status).to be_success
    expect(delivered).to eq(25)
    if TestKafka::MODE == :fd
      expect([added, distinct_names, name]).to eq([1, 1, "sluice.poller#0"])
    else
      expect([added, distinct_names]).to eq([25, 25])
      expect(name).to match(/\Asluice\.producer#p\d+\z/)
    end
  end

  context "in :fd mode", skip: (TestKafka::MODE != :fd && "runs in the :fd pass") do
    let(:build) { ->(**opts, &blk) { build_producer(mode: :fd, **opts, &blk) } }

    it "stops the poller thread after the last close and starts it again for a new producer" do
      first = build.call
      first.produce_sync(topic: topic, payload: "1")
      expect(poller).to be_alive
      expect(poller.count).to eq(1)
      first.close

      expect(poller).not_to be_alive
      expect(Thread.list.map(&:name)).not_to include("sluice.poller#0")
      second = build.call
      expect(second.produce_sync(topic: topic, payload: "2").error).to be_nil
      expect(poller).to be_alive
    end

    it "polls a newly registered producer at once, not at the next periodic poll" do
      warm = build.call
      warm.produce_sync(topic: topic, payload: "warm") # topic metadata and broker connection are warm
      registered = Queue.new
      fresh = build.call do |c|
        c.polling.fd.periodic_poll_interval = 60_000
        c.monitor = Sluice::Monitor.new.tap { |m| m.subscribe("poller.producer_registered") { |e| registered << e.payload } }
      end

      expect(registered.pop).to include(producer_id: fresh.id, poller_id: 0)
      expect(fresh.produce_async(topic: topic, payload: "now").wait(max_wait_timeout: 5_000).error).to be_nil
    end

    it "gives a dedicated poller its own thread and only its producers" do
      dedicated = Sluice::Polling::Poller.new
      events = Queue.new
      mine = build.call do |c|
        c.polling.poller = dedicated
        c.monitor = Sluice::Monitor.new.tap { |m| m.subscribe("poller.producer_registered") { |e| events << e.payload } }
      end
      other = build.call
      [mine, other].each { |p| p.produce_sync(topic: topic, payload: "x") }

      expect(events.pop).to include(producer_id: mine.id, poller_id: dedicated.id)
      expect(dedicated.id).to be > 0
      expect([dedicated.count, poller.count]).to eq([1, 1])
      expect(Thread.list.map(&:name)).to include("sluice.poller##{dedicated.id}", "sluice.poller#0")
    end

    it "keeps a slow callback on one poller from delaying delivery on another" do
      slow_started = Queue.new
      slow = build.call { |c| c.polling.poller = Sluice::Polling::Poller.new }
      slow.monitor.subscribe("message.acknowledged") { slow_started << true; sleep 0.5 } # the slow callback under test
      fast = build.call { |c| c.polling.poller = Sluice::Polling::Poller.new }
      fast.produce_sync(topic: topic, payload: "warm")

      slow.produce_async(topic: topic, payload: "slow")
      slow_started.pop
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      fast.produce_sync(topic: topic, payload: "fast")
      expect(Process.clock_gettime(Process::CLOCK_MONOTONIC) - started).to be < 0.4
    end

    it "wakes up for statistics through the pipe, not only at the periodic poll" do
      count = 0
      done = Queue.new
      stats = build.call(kafka: { "statistics.interval.ms": 100 })
      stats.monitor.subscribe("statistics.emitted") { (count += 1) == 1 && done << Process.clock_gettime(Process::CLOCK_MONOTONIC) }
      first = done.pop
      seen_at_first = count
      sleep 3 # the measurement window: statistics arrive every 100 ms
      expect(count - seen_at_first).to be >= 20 # the 1 s periodic poll alone would give ~3
      expect(Process.clock_gettime(Process::CLOCK_MONOTONIC) - first).to be >= 3
    end

    it "keeps serving the other producers when a callback raises" do
      errors = Queue.new
      broken = build.call
      broken.monitor.subscribe("message.acknowledged") { raise "callback bug" }
      broken.monitor.subscribe("error.occurred") { |e| errors << e.payload }
      healthy = build.call

      broken.produce_sync(topic: topic, payload: "1")
      expect(errors.pop).to include(type: "callbacks.listener.error")
      expect(healthy.produce_sync(topic: topic, payload: "2").error).to be_nil
      expect(broken.produce_sync(topic: topic, payload: "3").error).to be_nil
    end

    it "leaks no fds and no threads over 200 create/close cycles", timeout: 180 do
      build.call.close
      fds = open_fds
      threads = live_threads
      200.times { Sluice::Producer.new { |c| c.kafka = { "bootstrap.servers": TestKafka::BROKERS }; c.logger = Logger.new(nil) }.close }

      expect(open_fds).to be <= fds # a per-cycle leak would show as +30/+200; other specs' garbage may close a few
      expect(live_threads).to be <= threads
      expect(poller).not_to be_alive
    end

    it "works for transactional and idempotent producers" do
      txn = build.call(kafka: { "transactional.id": "sluice-fd-#{SecureRandom.hex(4)}" })
      idem = build.call(kafka: { "enable.idempotence": true })

      expect(txn.transaction { txn.produce_sync(topic: "sluice-spec-txn", payload: "t").error }).to be_nil
      expect(idem.produce_sync(topic: topic, payload: "i").error).to be_nil
    end
  end
end
