# frozen_string_literal: true

# Producer#close called by a listener, i.e. on the thread that polls the
# producer (the shared poller in :fd mode, the producer's own thread in
# :thread mode). Each scenario runs in its own process — a close that
# deadlocks there would wedge the suite — and all of them run in parallel.
RSpec.describe "Closing a producer from one of its callbacks", :kafka do
  include PollingScenarios

  before(:context) do
    scenarios = {
      # The listener closes its own producer; five messages are in flight.
      own: <<~'RUBY',
        producer = make_producer
        bystander = make_producer
        [producer, bystander].each { |p| p.produce_sync(topic: "sluice-spec-1p", payload: "warm-up") }
        inside = Queue.new
        calls = 0
        producer.monitor.subscribe("message.acknowledged") do |_event|
          # Acks of the other messages may be dispatched while this close
          # serves the queue (when they come in other batches): those nested
          # calls return at once, the outer close finishes the job.
          next if (calls += 1) > 1

          producer.close
          inside << { "returned" => true, "closed_inside" => producer.closed?, "thread" => Thread.current.name }
        rescue Exception => e # rubocop:disable Lint/RescueException
          inside << { "error" => "#{e.class}: #{e.message}" }
        end
        handles = producer.produce_many_async(Array.new(5) { |i| { topic: "sluice-spec-1p", payload: "closes itself #{i}" } })
        r = inside.pop
        r["closed_main"] = producer.closed?
        r["handles"] = handles.map { |h| h.wait.error.nil? }
        r["refuses"] = begin
          producer.produce_async(topic: "sluice-spec-1p", payload: "after")
          "accepted"
        rescue Sluice::Errors::ProducerClosedError => e
          e.class.name
        end
        r["bystander"] = bystander.produce_sync(topic: "sluice-spec-1p", payload: "still served").error.nil?
        poller = Sluice::Polling::Poller.instance
        r["count_with_bystander"] = poller.count
        bystander.close
        r["after_all"] = [poller.alive?, poller.count]
        r["mode"] = MODE
        result(r)
      RUBY

      # A's listener closes B, which has a message lingering in its queue.
      other: <<~'RUBY',
        a = make_producer
        b = make_producer(kafka: { "linger.ms": 300 })
        [a, b].each { |p| p.produce_sync(topic: "sluice-spec-1p", payload: "warm-up") }
        inside = Queue.new
        a.monitor.subscribe("message.acknowledged") do |_event|
          next if b.closed?

          b.close
          inside << { "returned" => true, "b_closed" => b.closed?, "thread" => Thread.current.name }
        rescue Exception => e # rubocop:disable Lint/RescueException
          inside << { "error" => "#{e.class}: #{e.message}" }
        end
        lingering = b.produce_async(topic: "sluice-spec-1p", payload: "lingers while B is closed")
        a.produce_async(topic: "sluice-spec-1p", payload: "closes B")
        r = inside.pop
        r["b_closed_main"] = b.closed?
        r["lingering_pending_after_close"] = lingering.pending?
        r["lingering_ok"] = lingering.wait.error.nil?
        r["a_still_works"] = a.produce_sync(topic: "sluice-spec-1p", payload: "A goes on").error.nil?
        poller = Sluice::Polling::Poller.instance
        r["count_with_a"] = poller.count
        a.close
        r["after_all"] = [poller.alive?, poller.count]
        r["mode"] = MODE
        result(r)
      RUBY

      # The listener closes the last producer and creates its replacement — the
      # recreate-on-error pattern. The replacement logs (debug) from its start,
      # so events are queued before its wake-up pipe exists: it is served at
      # once only if its registration serves it (periodic polls every 10 s).
      replace: <<~'RUBY',
        settings = ->(config) { config.polling.fd.periodic_poll_interval = 10_000 }
        old = make_producer(&settings)
        old.produce_sync(topic: "sluice-spec-1p", payload: "warm-up")
        replacements = Queue.new
        old.monitor.subscribe("message.acknowledged") do |_event|
          old.close
          replacements << make_producer(kafka: { debug: "generic" }, logger: Logger.new(File::NULL), max_wait_timeout: 2_000, &settings)
        rescue Exception => e # rubocop:disable Lint/RescueException
          replacements << "#{e.class}: #{e.message}"
        end
        old.produce_async(topic: "sluice-spec-1p", payload: "replace me")
        replacement = replacements.pop
        r = { "old_closed" => old.closed? }
        r["replacement"] = begin
          replacement.produce_sync(topic: "sluice-spec-1p", payload: "from the replacement").error.nil?
        rescue StandardError => e
          "#{e.class}: #{e.message}"
        end
        if r["replacement"] == true
          replacement.close
          poller = Sluice::Polling::Poller.instance
          r["after_all"] = [poller.alive?, poller.count]
        end
        result(r)
        exit!(0) unless r["replacement"] == true # a stuck replacement would make close wait for the periodic poll
      RUBY

      # The application closes the producer while one of its listeners closes it
      # too (shutdown racing a close-on-error listener). The listener's close
      # starts once the application's close is under way (it refuses new work).
      concurrent: <<~'RUBY',
        require "timeout"
        producer = make_producer
        producer.produce_sync(topic: "sluice-spec-1p", payload: "warm-up")
        in_listener = Queue.new
        go = Queue.new
        listener_closed = Queue.new
        producer.monitor.subscribe("message.acknowledged") do |_event|
          in_listener << true
          go.pop
          producer.close
          listener_closed << true
        end
        producer.produce_async(topic: "sluice-spec-1p", payload: "closed twice")
        in_listener.pop
        closer = Thread.new { producer.close }
        closing = lambda do
          producer.flush(0)
          false
        rescue Sluice::Errors::ProducerClosedError
          true
        end
        Thread.pass until closing.call
        go << true
        r = { "app_close_returned" => !closer.join(2).nil? }
        r["listener_close_returned"] = begin
          Timeout.timeout(0.5) { listener_closed.pop }
        rescue Timeout::Error
          false
        end
        r["closed"] = producer.closed?
        result(r)
        exit!(0) # a deadlocked close would keep the process from exiting
      RUBY

      # :fd bookkeeping: both producers of the global poller closed from a
      # listener, then a new producer; count and thread follow. (A regression,
      # fixed in da71e67: the count stayed at 2.)
      fd_bookkeeping: <<~'RUBY'
        poller = Sluice::Polling::Poller.instance
        a = make_producer(mode: :fd)
        b = make_producer(mode: :fd)
        done = Queue.new
        a.monitor.subscribe("message.acknowledged") do |_event|
          a.close
          b.close
          done << [poller.count, Thread.current.name]
        end
        a.produce_async(topic: "sluice-spec-1p", payload: "closes both")
        r = {}
        r["count_in_callback"], r["thread"] = done.pop
        r["count_after"] = poller.count
        c = make_producer(mode: :fd)
        r["count_with_new"] = poller.count
        r["new_delivers"] = c.produce_sync(topic: "sluice-spec-1p", payload: "after").error.nil?
        r["alive_with_new"] = poller.alive?
        c.close
        r["final"] = [poller.alive?, poller.count]
        result(r)
      RUBY
    }
    scenarios.delete(:fd_bookkeeping) unless TestKafka::MODE == :fd # an :fd-only example
    @scenarios = start_scenarios(**scenarios)
  end

  def outcome(name) = scenario_outcome(@scenarios, name)

  def polling_thread_name
    TestKafka::MODE == :fd ? "sluice.poller#0" : a_string_starting_with("sluice.producer#")
  end

  it "completes close called from the producer's own message.acknowledged listener" do
    own = outcome(:own)

    expect(own).to be_success, own.describe # the process exited 0: nothing wedged
    expect(own.data).to include("returned" => true, "closed_inside" => true, "thread" => polling_thread_name)
    expect(own["closed_main"]).to be(true)
    expect(own["handles"]).to eq([true] * 5) # close flushed the messages still in flight
    expect(own["refuses"]).to eq("Sluice::Errors::ProducerClosedError")
    expect(own["bystander"]).to be(true) # the polling thread goes on serving the others
  end

  it "completes close of ANOTHER producer (on the same poller in :fd mode) called from a listener" do
    other = outcome(:other)

    expect(other).to be_success, other.describe
    expect(other.data).to include("returned" => true, "b_closed" => true, "thread" => polling_thread_name)
    expect(other["b_closed_main"]).to be(true)
    expect(other["lingering_pending_after_close"]).to be(false) # close waited for B's lingering message
    expect(other["lingering_ok"]).to be(true)
    expect(other["a_still_works"]).to be(true)
  end

  # A regression (fixed in da71e67): the poller thread that was stopping registered the new producer,
  # and no thread served it.
  it "serves a producer created by the listener that closed the last producer, at once" do
    replace = outcome(:replace)

    expect(replace).to be_success, replace.describe
    expect(replace["old_closed"]).to be(true)
    expect(replace["replacement"]).to be(true)
    expect(replace["after_all"]).to eq([false, 0])
  end

  # A regression (fixed in da71e67): a close on the polling thread waited for the other close, which
  # waited for the polling thread (a deadlock).
  it "completes when the application and a listener close the producer at the same time" do
    concurrent = outcome(:concurrent)

    expect(concurrent).to be_success, concurrent.describe
    expect(concurrent.data).to eq("app_close_returned" => true, "listener_close_returned" => true, "closed" => true)
  end

  it "keeps the global poller's count exact when its producers close on the poller thread (:fd)",
     skip: (TestKafka::MODE != :fd && "an :fd-only example: runs in the :fd pass") do
    fd = outcome(:fd_bookkeeping)

    expect(fd).to be_success, fd.describe
    expect(fd["thread"]).to eq("sluice.poller#0")
    expect(fd["count_in_callback"]).to eq(0)
    expect(fd["count_after"]).to eq(0)
    expect(fd["count_with_new"]).to eq(1)
    expect(fd["new_delivers"]).to be(true)
    expect(fd["alive_with_new"]).to be(true)
    expect(fd["final"]).to eq([false, 0])
  end

  it "leaves the global poller idle (:fd) once every producer is closed",
     skip: (TestKafka::MODE != :fd && "an :fd-only example: runs in the :fd pass") do
    expect([outcome(:own)["after_all"], outcome(:other)["after_all"]]).to eq([[false, 0], [false, 0]])
    expect([outcome(:own)["count_with_bystander"], outcome(:other)["count_with_a"]]).to eq([1, 1])
  end
end
