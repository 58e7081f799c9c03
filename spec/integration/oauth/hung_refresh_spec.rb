# frozen_string_literal: true

require "socket"

# A token refresh that hangs (issue 53, item 2): a token endpoint that accepts
# and never answers, or a listener that waits on something. Refreshes ran on
# the polling thread: another producer's produce_sync on the same poller took
# 3.3-4.2 s, the client's own deliveries stopped, and its close waited for the
# HTTP timeout. They run on a thread of the client's own now (RefreshThread).
RSpec.describe "A hung OAUTHBEARER token refresh", :kafka do
  include OAuthBearer
  let(:endpoint) { TCPServer.new("127.0.0.1", 0) }
  let(:accepted) { Queue.new }
  let(:connections) { [] }

  before do
    acceptor = Thread.new do
      loop do
        connections << endpoint.accept # held open, never answered
        accepted << true
      end
    end
    acceptor.report_on_exception = false
    @acceptor = acceptor
  end

  after do
    @acceptor.kill.join
    connections.each(&:close)
    endpoint.close
  end

  fd_only = TestKafka::MODE != :fd && "a shared :fd poller: in :thread mode each client has its own thread"

  # The built-in provider, with its default 10 s HTTP timeout.
  def hung_monitor
    provider = Sluice::Auth::OauthClientCredentials.new(token_endpoint_url: "http://127.0.0.1:#{endpoint.addr[1]}/token",
                                                        client_id: "sluice-app", client_secret: "secret")
    Sluice::Monitor.new(logger: Logger.new(nil)).tap { |monitor| monitor.subscribe(provider) }
  end

  def latencies(producer, count)
    Array.new(count) do |i|
      started = monotonic
      expect(producer.produce_sync(topic: topic, payload: "meanwhile #{i}").error).to be_nil
      monotonic - started
    end
  end

  def rounded(times) = times.map { |time| time.round(3) }

  def report(what, times)
    RSpec.configuration.reporter.message("  #{what} (#{TestKafka::MODE}): #{rounded(times)} s")
  end

  it "leaves another producer of the same poller delivering within max_time", skip: fd_only do
    poller = Sluice::Polling::Poller.new
    bystander = build_producer(mode: :fd) { |config| config.polling.poller = poller }
    bystander.produce_sync(topic: topic, payload: "warm-up")
    build_producer(kafka: sasl, mode: :fd, monitor: hung_monitor) { |config| config.polling.poller = poller }
    pop_within(accepted, what: "the token request")

    times = latencies(bystander, 5)
    report("bystander produce_sync while a token endpoint hangs", times)
    # max_time (100 ms) and a margin for a loaded machine; on the poller, the
    # refresh held the bystander for the HTTP timeout (10 s).
    expect_elapsed(times.max, within: 0.6, guards: "the hung endpoint's 10 s HTTP timeout (#{rounded(times)})")
  end

  it "leaves the client's own deliveries going while its listener's refresh hangs" do
    release = Queue.new
    hanging = Queue.new
    answered = Queue.new
    monitor = Sluice::Monitor.new(logger: Logger.new(nil))
    monitor.subscribe("oauthbearer.token_refresh") do |event|
      (hanging << true) && release.pop unless answered.empty? # the second refresh hangs
      hand_token(event[:bearer], lifetime_ms: 1_500)
      answered << event[:bearer]
    end
    producer = build_producer(kafka: sasl, monitor: monitor)
    producer.produce_sync(topic: topic, payload: "first token")
    # due 1.2 s after the first token (80% of its lifetime)
    pop_within(hanging, 5, what: "the second refresh")

    times = latencies(producer, 3)
    report("own produce_sync while its refresh hangs", times)
    expect_elapsed(times.max, within: 0.6, guards: "a refresh listener that never returns (#{rounded(times)})")
  ensure
    release << true
  end

  it "lets the client close within about a second, its refresh thread gone" do
    producer = build_producer(kafka: sasl, monitor: hung_monitor)
    pop_within(accepted, what: "the token request")

    expect_within(2, guards: "the hung endpoint's 10 s HTTP timeout") { producer.close }
    expect(Thread.list.map(&:name)).not_to include("sluice.oauthbearer##{producer.id}")
  end
end
