# frozen_string_literal: true

# What the OAUTHBEARER specs (spec/integration/oauth/) share: the broker's
# SASL_PLAINTEXT listener, which takes unsigned tokens (Kafka's default
# unsecured validator), and a token for "alice" handed to a client. Groups
# include it explicitly (`include OAuthBearer`); it brings PollingScenarios.
module OAuthBearer
  def self.included(group)
    group.include(PollingScenarios)
  end

  def topic = "sluice-spec-1p"

  # A client's kafka settings for the SASL_PLAINTEXT listener.
  def sasl = { "bootstrap.servers": TestKafka::SASL_BROKERS, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "OAUTHBEARER" }

  # Hands bearer (a client, or a refresh event's [:bearer]) an unsigned token for alice, valid for lifetime_ms.
  def hand_token(bearer, lifetime_ms: 3_600_000)
    bearer.oauthbearer_set_token(token: unsigned_jwt("alice"), principal_name: "alice", lifetime_ms: (Time.now.to_f * 1000).to_i + lifetime_ms)
  end
end
