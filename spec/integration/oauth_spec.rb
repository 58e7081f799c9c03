# frozen_string_literal: true

require "base64"
require "json"

# The broker's SASL_PLAINTEXT listener uses Kafka's default unsecured JWT
# validator: unsigned tokens are accepted, expired ones are not.
RSpec.describe "OAUTHBEARER token refresh", :kafka do
  def unsigned_jwt(subject)
    now = Time.now.to_i
    encode = ->(hash) { Base64.urlsafe_encode64(JSON.generate(hash), padding: false) }
    "#{encode.call(alg: 'none')}.#{encode.call(sub: subject, iat: now, exp: now + 3600)}."
  end

  it "asks for a token through oauthbearer.token_refresh and delivers once it is set" do
    refreshes = Queue.new
    producer = build_producer(kafka: { "bootstrap.servers": TestKafka::SASL_BROKERS, "security.protocol": "SASL_PLAINTEXT",
                                       "sasl.mechanisms": "OAUTHBEARER" }) do |config|
      config.monitor = Sluice::Monitor.new.tap do |monitor|
        monitor.subscribe("oauthbearer.token_refresh") { |event| refreshes << event.payload }
      end
    end

    refresh = refreshes.pop
    expect(refresh[:producer_id]).to eq(producer.id)
    producer.oauthbearer_set_token(token: unsigned_jwt("alice"), lifetime_ms: (Time.now.to_i + 3600) * 1000,
                                   principal_name: "alice")
    expect(producer.produce_sync(topic: "sluice-spec-1p", payload: "authenticated").error).to be_nil
  end

  it "rejects a malformed token with a KafkaError" do
    producer = build_producer(kafka: { "bootstrap.servers": TestKafka::SASL_BROKERS, "security.protocol": "SASL_PLAINTEXT",
                                       "sasl.mechanisms": "OAUTHBEARER" })
    expect { producer.oauthbearer_set_token(token: "", lifetime_ms: 1, principal_name: "alice") }
      .to raise_error(Sluice::KafkaError)
  end
end
