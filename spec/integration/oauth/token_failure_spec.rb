# frozen_string_literal: true

# An oauthbearer.token_refresh listener that answers with a failure (its
# token service is down, issue 29): librdkafka then connects to no broker and
# says only that it has no token (no all_brokers_down), so produce_sync waited
# for its WaitTimeoutError (5 s), the handle ended msg_timed_out and a
# consumer never raised. The application's failure is the refusal: every
# client raises AuthenticationError with its reason, and recovers once the
# listener sets a token.
RSpec.describe "OAUTHBEARER token refresh answered with a failure", :kafka do
  include OAuthBearer
  # The listener's answer: a failure until a token is handed in.
  let(:tokens) { Queue.new }

  def monitor_answering
    Sluice::Monitor.new.tap do |monitor|
      monitor.subscribe("oauthbearer.token_refresh") do |event|
        if tokens.empty?
          event[:bearer].oauthbearer_set_token_failure("token service down")
        else
          hand_token(event[:bearer])
        end
      end
    end
  end

  def refused_within(limit, guards:, &block)
    error = nil
    expect_within(limit, guards: guards) do
      block.call
    rescue Sluice::Errors::AuthenticationError => e
      error = e
    end
    expect(error).to be_a(Sluice::Errors::AuthenticationError), "no AuthenticationError"
    expect(error.kafka_error.message).to include("token service down")
  end

  it "raises AuthenticationError from produce_sync within 5 s (not max_wait_timeout's 10), every time, and delivers once a token is set" do
    producer = build_producer(kafka: sasl, monitor: monitor_answering, max_wait_timeout: 10_000)

    3.times { |i| refused_within(5, guards: "max_wait_timeout (10 s)") { producer.produce_sync(topic: topic, payload: "refused #{i}") } }
    tokens << :valid
    hand_token(producer)
    expect(producer.produce_sync(topic: topic, payload: "with a token").error).to be_nil
  end

  it "raises it from Consumer#poll within 5 s (not poll's 10), every time (librdkafka asks for a token again only after 10 s)" do
    consumer = Sluice::Consumer.new do |config|
      config.kafka = sasl.merge("group.id": "sluice-spec-token-failure-#{SecureRandom.hex(4)}")
      config.monitor = monitor_answering
      config.polling.mode = TestKafka::MODE
      config.logger = Logger.new(nil)
    end
    consumer.subscribe(topic)
    3.times { refused_within(5, guards: "poll's 10 s timeout") { consumer.poll(10_000) } }
  ensure
    consumer&.close
  end

  it "raises it from an admin call within 5 s, not after max_wait_timeout" do
    admin = Sluice::Admin.new do |config|
      config.kafka = sasl
      config.monitor = monitor_answering
      config.logger = Logger.new(nil)
    end
    refused_within(5, guards: "max_wait_timeout (30 s)") { admin.topics }
    refused_within(5, guards: "max_wait_timeout (30 s)") { admin.groups }
  ensure
    admin&.close
  end
end
