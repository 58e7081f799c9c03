# frozen_string_literal: true

# OAUTHBEARER against the broker's SASL_PLAINTEXT listener (Kafka's default
# unsecured JWT validator: unsigned tokens are fine). The token comes from an
# oauthbearer.token_refresh listener that calls Producer#oauthbearer_set_token
# itself — on the client's refresh thread, off the poller — in the mode under test.
RSpec.describe "OAUTHBEARER token refresh answered by the listener", :kafka do
  include OAuthBearer
  let(:refreshes) { Queue.new }
  let(:errors) { Queue.new }

  # A producer whose listener sets a token valid for lifetime_ms. The listener
  # may run before Producer.new returns (the refresh is requested at once), so
  # it gets the producer through a Queue.
  def oauth_producer(lifetime_ms: 3_600_000)
    producer_box = Queue.new
    producer = nil
    monitor = Sluice::Monitor.new
    monitor.subscribe("error.occurred") { |event| errors << event.payload }
    monitor.subscribe("oauthbearer.token_refresh") do |event|
      producer ||= producer_box.pop
      hand_token(producer, lifetime_ms: lifetime_ms)
      refreshes << [event.payload, Thread.current.name]
    end
    build_producer(kafka: sasl, monitor: monitor, max_wait_timeout: 10_000).tap { |built| producer_box << built }
  end

  # Off the polling thread (a refresh may wait on the network): the client's own refresh thread, in both modes.
  def refresh_thread_name(producer) = "sluice.oauthbearer##{producer.id}"

  it "emits oauthbearer.token_refresh with producer_id; the token the listener sets lets produce_sync succeed" do
    producer = oauth_producer

    report = producer.produce_sync(topic: topic, payload: "authenticated by the listener's token")

    expect(report.error).to be_nil
    payload, thread = pop_within(refreshes, 1, what: "oauthbearer.token_refresh") # answered before the delivery: a bound, not a wait
    expect(payload).to include(producer_id: producer.id)
    expect(payload).to have_key(:bearer_config)
    expect(thread).to eq(refresh_thread_name(producer))
    expect(errors).to be_empty
  end

  it "serves the next refresh when the token nears its expiry, and keeps delivering" do
    producer = oauth_producer(lifetime_ms: 1_500)
    producer.produce_sync(topic: topic, payload: "first token")
    pop_within(refreshes, what: "the first oauthbearer.token_refresh")

    payload, thread = pop_within(refreshes, 5, what: "the refresh before the token expires")

    expect(payload).to include(producer_id: producer.id)
    expect(thread).to eq(refresh_thread_name(producer))
    expect(producer.produce_sync(topic: topic, payload: "second token").error).to be_nil
  end

  it "cannot authenticate without a listener: error.occurred reports the missing token, nothing is delivered" do
    monitor = Sluice::Monitor.new
    monitor.subscribe("error.occurred") { |event| errors << event.payload }
    producer = build_producer(kafka: sasl, monitor: monitor, max_wait_timeout: 300)

    error = pop_within(errors, what: "error.occurred")
    expect(error).to include(producer_id: producer.id, type: "librdkafka.error")
    expect(error[:error]).to have_attributes(code: :authentication, message: /no oauthbearer\.token_refresh listener/)
    expect { producer.produce_sync(topic: topic, payload: "never delivered") }.to raise_error(Sluice::Errors::WaitTimeoutError)
  ensure
    producer&.close!
  end
end
