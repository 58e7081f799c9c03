# frozen_string_literal: true

# The token refresh flow itself is in listener_refresh_spec.rb.
RSpec.describe "OAUTHBEARER token refresh", :kafka do
  it "rejects a malformed token with a KafkaError" do
    producer = build_producer(kafka: { "bootstrap.servers": TestKafka::SASL_BROKERS, "security.protocol": "SASL_PLAINTEXT",
                                       "sasl.mechanisms": "OAUTHBEARER" })
    expect { producer.oauthbearer_set_token(token: "", lifetime_ms: 1, principal_name: "alice") }
      .to raise_error(Sluice::KafkaError)
  end
end
