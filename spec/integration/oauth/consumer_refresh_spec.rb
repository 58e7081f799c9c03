# frozen_string_literal: true

# OAUTHBEARER for consumers: the refresh request is a main-queue event, so
# the poller (:fd) or the consumer's polling thread (:thread) picks it up, also
# while the consumer is idle or its reader is busy in a block, and hands it to
# the consumer's refresh thread.
RSpec.describe "A consumer's OAUTHBEARER token refresh", :kafka do
  include OAuthBearer

  let(:refreshes) { Queue.new }

  # The listener may run before Consumer.new returns: it gets the consumer through a Queue.
  def oauth_consumer(lifetime_ms:)
    box = Queue.new
    consumer = nil
    monitor = Sluice::Monitor.new(logger: Logger.new(nil))
    monitor.subscribe("oauthbearer.token_refresh") do |event|
      consumer ||= box.pop
      hand_token(consumer, lifetime_ms: lifetime_ms)
      refreshes << [event.payload, Thread.current.name]
    end
    built = Sluice::Consumer.new do |config|
      config.kafka = sasl.merge("group.id": "sluice-spec-oauth-#{rand(1 << 30)}")
      config.polling.mode = TestKafka::MODE
      config.monitor = monitor
    end
    box << built
    built
  end

  it "is refreshed on its refresh thread, and again while the reader waits; the token lets it read" do
    report = build_producer.produce_sync(topic: "sluice-spec-1p", payload: "read with a token")
    consumer = oauth_consumer(lifetime_ms: 1_500)
    payload, thread = pop_within(refreshes, 10, what: "the first oauthbearer.token_refresh")
    expect(payload).to include(consumer_id: consumer.id)
    expect(thread).to eq("sluice.oauthbearer##{consumer.id}")

    consumer.assign("sluice-spec-1p" => { 0 => report.offset })
    message = consumer.poll(10_000)
    expect(message&.payload).to eq("read with a token")

    reader = Thread.new { consumer.each_message { nil } } # idle from here: nothing more is read
    # Due 1.2 s after the last token (80% of its lifetime, checked each second by librdkafka); 10 s
    # tells a late one (CI's loaded machine once waited over 5 s) from one that never comes.
    pop_within(refreshes, 10, what: "the next refresh")
    consumer.stop
    expect(reader.join(10)).to be(reader)
  ensure
    consumer&.close
  end
end
