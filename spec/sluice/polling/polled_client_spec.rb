# frozen_string_literal: true

# Polling::PolledClient without a broker: a fake native client hands out drained batches (flat quads, as
# Client#drain does), and the real monitor records what is announced. What it promises: each event reaches
# its place, in order; a turn's budget bounds dispatch too (one item per turn at least), the rest waits for
# the next turn; a callback that serves again sees new events at once; a failed dispatch is reported and the
# turn goes on; a closed client is not served.
RSpec.describe Sluice::Polling::PolledClient do
  subject(:state) do
    described_class.new(kind: kind, client_id: "c1", client: native, monitor: monitor, notifier: notifier, logger: logger,
                        max_time: 100, periodic_poll_interval: 1_000, results: results)
  end

  # The native client: #drain hands out the queued batches one by one (nil once none is left).
  let(:native_class) do
    Struct.new(:batches, :drains, :exhausted, :fatal, :token_failures, :events_waiting) do
      def drain(budget, acks)
        drains << [budget, acks]
        batches.shift
      end

      def exhausted? = exhausted
      def fatal_error = fatal
      def progress = 0
      def wait_events(_timeout_ms) = events_waiting
      def oauthbearer_set_token_failure(reason) = token_failures << reason
      def oauthbearer_set_token(*) = nil
    end
  end
  let(:native) { native_class.new([], [], false, nil, [], false) }
  let(:kind) { :producer }
  let(:results) { nil }
  let(:monitor) { Sluice::Monitor.new(logger: logger) }
  let(:log) { StringIO.new }
  let(:logger) { Logger.new(log) }
  let(:notifier) { Struct.new(:notified) { def notify = self.notified += 1 }.new(0) }
  let(:seen) { [] }

  def record(*names) = names.each { |name| monitor.subscribe(name) { |event| seen << [name, event.payload] } }
  def quad(type, first = nil, second = nil, third = nil) = [type, first, second, third]
  def librdkafka_error(name) = quad(:error, Sluice::KafkaError.number_for(name), "#{name} reason", false)

  it "dispatches the events it drained, in order, each to its place, and notifies waiters after the turn" do
    record("error.occurred", "consumer.offsets_committed")
    native.batches << [*librdkafka_error(:all_brokers_down), *quad(:offset_commit, 0, [["t", 0, 5], ["t", 1, 7]]), *quad(:log, 3, "FAC", "hello")]

    expect(state.serve).to be(false)
    expect(seen.map(&:first)).to eq(["error.occurred", "consumer.offsets_committed"])
    expect(seen.first.last).to include(producer_id: "c1", type: "librdkafka.error", error: have_attributes(code: :all_brokers_down))
    expect(seen.last.last).to eq(producer_id: "c1", partitions: { "t" => { 0 => 5, 1 => 7 } }, error: nil)
    expect(log.string).to include("ERROR -- : [c1] FAC: hello")
    expect(notifier.notified).to eq(1)
  end

  it "reports a failed commit as an error too, but not a commit that had nothing to commit" do
    record("error.occurred")
    native.batches << [*quad(:offset_commit, Sluice::KafkaError.number_for(:no_offset), []),
                       *quad(:offset_commit, Sluice::KafkaError.number_for(:rebalance_in_progress), [])]
    state.serve

    expect(seen.map { |_, payload| [payload[:type], payload[:error].code] }).to eq([["consumer.commit_error", :rebalance_in_progress]])
  end

  it "asks the drain for acknowledgements only while someone listens for them" do
    state.serve
    record("message.acknowledged")
    state.serve

    expect(native.drains.map(&:last)).to eq([false, true])
  end

  it "says work is left when the native drain stopped on its budget" do
    native.exhausted = true

    expect(state.serve).to be(true)
  end

  context "for an admin client" do
    let(:kind) { :admin }
    let(:results) { Sluice::Admin::Requests.new }

    it "hands request results to the admin's requests" do
      id = results.open
      native.batches << quad(:admin_result, [id, 0, "", :payload])
      state.serve

      expect(results.result(id)).to eq([0, "", :payload])
    end
  end

  it "dispatches at least one item per turn however small the budget, and keeps the rest, in order, for the next turns" do
    record("error.occurred")
    native.batches << [*librdkafka_error(:transport), *librdkafka_error(:resolve), *librdkafka_error(:fail)]

    turns = Array.new(2) { state.serve(0) }

    expect(turns).to eq([true, true])
    expect(seen.map { |_, payload| payload[:error].code }).to eq(%i[transport resolve])
    expect([native.drains.size, state.settled?]).to eq([1, false]) # the backlog first: no new drain while it lasts
    expect(state.serve(0)).to be(false) # the last item, then a drain that found nothing
    expect(seen.map { |_, payload| payload[:error].code }).to eq(%i[transport resolve fail])
    expect([native.drains.size, state.settled?]).to eq([2, true])
  end

  describe "poller.budget_exceeded" do
    before { record("poller.budget_exceeded") }

    # A budget of 0 ms: any item's listeners run past it.
    it "names the event whose listeners ran past max_time, the listeners, and how long they took, even when nothing was left" do
      listener = Class.new { def on_error_occurred(_event) = nil }
      stub_const("SlowErrorListener", listener)
      monitor.subscribe(listener.new)
      block = monitor.subscribe("error.occurred") { nil }
      native.batches << librdkafka_error(:transport)

      expect(state.serve(0)).to be(false)
      names = ["SlowErrorListener#on_error_occurred", "block at #{block.source_location.join(":")}"]
      expect(seen).to match([["poller.budget_exceeded",
                              { producer_id: "c1", max_time: 0, event: "error.occurred", time: be_a(Float), listeners: names }]])
    end

    it "names the first item that ran past it, when work is left" do
      handle = Sluice::Delivery::Handle.new(notifier, "t", :label)
      native.batches << [handle, 0, 5, 0, *librdkafka_error(:fail)]

      expect(state.serve(0)).to be(true)
      expect(seen.map { |_, payload| payload[:event] }).to eq(["message.acknowledged"])
    end

    it "names no event when the drain itself used the budget up" do
      native.exhausted = true

      expect(state.serve).to be(true)
      expect(seen).to eq([["poller.budget_exceeded", { producer_id: "c1", max_time: 100, event: nil, listeners: [], time: nil }]])
    end

    it "is not announced for a turn within its budget" do
      native.batches << librdkafka_error(:transport)

      expect(state.serve(10_000)).to be(false)
      expect(seen).to eq([])
    end
  end

  it "serves new events at once when a callback serves again, and finishes its own backlog after it" do
    record("error.occurred")
    native.batches << [*librdkafka_error(:transport), *librdkafka_error(:fail)] << librdkafka_error(:resolve)
    monitor.subscribe("error.occurred") { |event| state.serve if event[:error].code == :transport }

    state.serve

    expect(seen.map { |_, payload| payload[:error].code }).to eq(%i[transport resolve fail])
  end

  it "reports an item it could not dispatch, and goes on with the next" do
    broken = Object.new.tap { |head| head.define_singleton_method(:topic) { raise "broken handle" } }
    record("error.occurred", "message.acknowledged")
    native.batches << [broken, 0, 0, 0, *librdkafka_error(:fail)]
    state.serve

    expect(seen.map { |_, payload| payload[:type] }).to eq(["poller.dispatch_error", "librdkafka.error"])
    expect(seen.first.last[:error].message).to eq("broken handle")
  end

  describe "a failed delivery" do
    let(:handle) { Sluice::Delivery::Handle.new(notifier, "t", :label) }

    before { record("error.occurred", "message.purged") }

    it "counts and announces a purged message as purged" do
      native.batches << [handle, 2, -1001, Sluice::KafkaError.number_for(:purge_queue)]
      state.serve

      expect(state.purged).to eq(1)
      expect(seen).to eq([["message.purged", { producer_id: "c1", topic: "t", label: :label, error: handle.error }]])
      expect(handle.error.code).to eq(:purge_queue)
    end

    it "fails with the fatal error that ended the client, instead of the purge it led to" do
      native.fatal = [Sluice::KafkaError.number_for(:fenced), "fenced by a newer producer"]
      native.batches << [handle, 2, -1001, Sluice::KafkaError.number_for(:purge_queue)]
      state.serve

      expect(state.purged).to eq(0)
      expect(handle.error).to have_attributes(code: :fenced, fatal?: true)
      expect(seen.map { |_, payload| payload[:type] }).to eq(["librdkafka.dispatch_error"])
    end

    it "reports any other failure as a ProduceError carrying the report" do
      native.batches << [handle, 2, -1001, Sluice::KafkaError.number_for(:msg_size_too_large)]
      state.serve

      expect(seen.first.last).to include(type: "librdkafka.dispatch_error", topic: "t", partition: 2, label: :label,
                                         error: be_a(Sluice::Errors::ProduceError).and(have_attributes(delivery_report: handle)))
    end
  end

  it "serves nothing once closed, and notifies nobody" do
    native.batches << librdkafka_error(:fail)
    state.close!

    expect(state.serve).to be(false)
    expect([native.drains, notifier.notified, state.closed?]).to eq([[], 0, true])
  end

  it "pumps: drains only when events arrived within the wait" do
    state.pump
    native.events_waiting = true
    state.pump

    expect(native.drains.map(&:first)).to eq([-1])
  end

  it "leaves its poller once" do
    expect([state.leave!, state.leave!]).to eq([true, false])
  end

  describe "a token refresh" do
    it "tells librdkafka there is no token when nobody listens, and replays the request to the first listener" do
      native.batches << quad(:oauthbearer_token_refresh, "sasl.oauthbearer.config")
      state.serve
      expect(native.token_failures).to eq(["no oauthbearer.token_refresh listener to provide a token"])

      asked = []
      monitor.subscribe("oauthbearer.token_refresh") { |event| asked << event[:bearer_config] }
      state.await_refresh
      expect(asked).to eq(["sasl.oauthbearer.config"])
      expect(native.token_failures.last).to eq("the oauthbearer.token_refresh listeners set no token")
    end

    it "reports no failure when a listener set a token" do
      answered = Queue.new
      monitor.subscribe("oauthbearer.token_refresh") do
        state.oauthbearer_set_token("jwt", 0, "svc", [])
        answered << true
      end
      native.batches << quad(:oauthbearer_token_refresh, "config")
      state.serve
      Timeout.timeout(5) { answered.pop }
      state.await_refresh

      expect(native.token_failures).to eq([])
    end

    # A listener may fetch its token over the network: the poller's other clients must not wait for it.
    it "is answered on the client's refresh thread, while serve returns at once" do
      release = Queue.new
      threads = Queue.new
      monitor.subscribe("oauthbearer.token_refresh") do
        threads << Thread.current
        release.pop
      end
      native.batches << quad(:oauthbearer_token_refresh, "config")
      state.serve
      refresher = Timeout.timeout(5) { threads.pop }

      expect(refresher).not_to be(Thread.current)
      expect(refresher.name).to eq("sluice.oauthbearer#c1")
    ensure
      release << true
      state.await_refresh
    end

    it "is ended at close!: a hung listener keeps no thread, and await_refresh returns" do
      started = Queue.new
      monitor.subscribe("oauthbearer.token_refresh") do
        started << Thread.current
        Queue.new.pop # never answered
      end
      native.batches << quad(:oauthbearer_token_refresh, "config")
      state.serve
      refresher = Timeout.timeout(5) { started.pop }
      state.close!
      state.await_refresh

      expect(refresher).not_to be_alive
    end
  end
end
