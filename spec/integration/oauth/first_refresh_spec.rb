# frozen_string_literal: true

# The first oauthbearer.token_refresh fires inside Producer.new/Consumer.new,
# before an application could subscribe on producer.monitor (WaterDrop users
# subscribe after new). It waits for the first listener; event[:bearer] is the
# client that answers it; a request left unanswered ends in a token failure,
# so librdkafka asks again instead of never. Each delivery here must come well
# before librdkafka's own 10 s retry of a failed refresh.
RSpec.describe "The first OAUTHBEARER token refresh", :kafka do
  include OAuthBearer
  let(:refreshes) { Queue.new }
  let(:errors) { Queue.new }

  def answer(event)
    hand_token(event[:bearer])
    refreshes << event.payload
  end

  def report_time(style, started)
    RSpec.configuration.reporter.message(format("  first delivery %s: %.2f s after new (%s)", style, monotonic - started, TestKafka::MODE))
  end

  it "is replayed to a listener subscribed after Producer.new; event[:bearer] answers it; delivery comes in < 2 s" do
    started = monotonic
    producer = build_producer(kafka: sasl, max_wait_timeout: 2_000)
    producer.monitor.subscribe("oauthbearer.token_refresh") { |event| answer(event) }

    expect(producer.produce_sync(topic: topic, payload: "subscribed after new").error).to be_nil
    report_time("subscribed after new", started)
    expect(pop_within(refreshes, 1, what: "the replayed refresh")).to include(producer_id: producer.id, bearer: producer)
  end

  it "gives a listener on a shared monitor, subscribed before new, the producer to answer with; delivery in < 2 s" do
    monitor = Sluice::Monitor.new(logger: Logger.new(nil))
    monitor.subscribe("oauthbearer.token_refresh") { |event| answer(event) }
    started = monotonic
    producer = build_producer(kafka: sasl, monitor: monitor, max_wait_timeout: 2_000)

    expect(producer.produce_sync(topic: topic, payload: "shared monitor").error).to be_nil
    report_time("shared monitor", started)
    expect(pop_within(refreshes, 1, what: "the refresh")[:bearer]).to be(producer)
  end

  it "ends a request its listeners did not answer in a token failure, so librdkafka reports it and asks again" do
    monitor = Sluice::Monitor.new(logger: Logger.new(nil))
    monitor.subscribe("error.occurred") { |event| errors << event[:error] }
    monitor.subscribe("oauthbearer.token_refresh") { |event| refreshes << event.payload }
    producer = build_producer(kafka: sasl, monitor: monitor)

    pop_within(refreshes, what: "the refresh")
    error = pop_within(errors, what: "token failure")
    expect(error).to have_attributes(code: :authentication, message: /set no token/)
    producer.close!
  end

  it "is replayed to a listener subscribed after Consumer.new; the consumer reads in < 2 s" do
    offset = build_producer.produce_sync(topic: topic, payload: "read after a late subscribe").offset
    started = monotonic
    consumer = Sluice::Consumer.new do |config|
      config.kafka = sasl.merge("group.id": "sluice-spec-oauth-late-#{rand(1 << 30)}")
      config.polling.mode = TestKafka::MODE
      config.logger = Logger.new(nil)
    end
    consumer.monitor.subscribe("oauthbearer.token_refresh") { |event| answer(event) }
    consumer.assign(topic => { 0 => offset })

    expect(consumer.poll(2_000)&.payload).to eq("read after a late subscribe")
    report_time("consumer subscribed after new", started)
    expect(pop_within(refreshes, 1, what: "the replayed refresh")[:bearer]).to be(consumer)
  ensure
    consumer&.close
  end
end
