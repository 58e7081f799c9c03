# frozen_string_literal: true

require "securerandom"
require_relative "../../support/oauth/identity_provider"

# OAuth client credentials end to end (issue 41): Sluice::Auth::OauthClientCredentials
# fetches tokens from an identity provider of the spec's own (a token endpoint
# and a JWKS on loopback, RS256 keys made here), and a broker of the spec's own
# validates them for real (Kafka's JWT validator against that JWKS, audience
# "kafka": bin/kafka's KAFKA_OAUTH_JWKS_URL), not with the unsecured validator.
# A producer and a consumer authenticate and round-trip a message; a wrong
# client secret, an expired token, an endpoint that is down and a token signed
# with a key the JWKS lacks are each refused by name within seconds.
RSpec.describe "OAuth client credentials against a JWKS-validating broker", :kafka, :own_broker, timeout: 120 do
  let(:topic) { "sluice-spec-oidc" }
  let(:sasl) do
    { "bootstrap.servers": "127.0.0.1:#{OwnBroker::PORTS.fetch("KAFKA_SASL_PORT")}", "security.protocol": "SASL_PLAINTEXT",
      "sasl.mechanisms": "OAUTHBEARER" }
  end

  before(:context) do
    @idp = IdentityProvider.new
    OwnBroker.stop # a broker another spec left running validates nothing
    OwnBroker.start("KAFKA_OAUTH_JWKS_URL" => "#{@idp.url}/jwks")
    OwnBroker.create_topic("sluice-spec-oidc")
  end

  after(:context) do
    OwnBroker.stop # the next spec's broker is an ordinary one
    @idp&.shutdown
  end

  after { @idp.lifetime = 3600 }

  def provider(secret: IdentityProvider::SECRET, url: "#{@idp.url}/token")
    Sluice::Auth::OauthClientCredentials.new(token_endpoint_url: url, client_id: IdentityProvider::CLIENT, client_secret: secret, scope: "kafka")
  end

  def monitor_of(token_provider) = Sluice::Monitor.new(logger: Logger.new(nil)).tap { |monitor| monitor.subscribe(token_provider) }

  # The AuthenticationError produce_sync raises. No wall-clock bound: one at or above max_wait_timeout
  # (10 s) told nothing apart, and a wait that ran out would raise WaitTimeoutError, not this.
  def refusal(monitor)
    producer = build_producer(kafka: sasl, monitor: monitor, max_wait_timeout: 10_000)
    producer.produce_sync(topic: topic, payload: "refused")
    raise "delivered without a valid token"
  rescue Sluice::Errors::AuthenticationError => e
    e
  end

  it "authenticates a producer and a consumer with tokens from the token endpoint, and round-trips a message" do
    monitor = monitor_of(provider)
    payload = SecureRandom.hex(8)
    expect(build_producer(kafka: sasl, monitor: monitor).produce_sync(topic: topic, payload: payload).error).to be_nil
    consumer = build_consumer(**sasl, "auto.offset.reset": "earliest") { |config| config.monitor = monitor }
    consumer.subscribe(topic)
    expect(poll_until_payload(consumer, payload)).to eq(payload)
  end

  {
    "a wrong client secret" => [{ secret: "wrong-secret" }, /token endpoint .* answered HTTP 401: .*invalid_client/],
    "a token endpoint that is down" => [{ url: "http://127.0.0.1:1/token" }, /token endpoint .* not reachable/]
  }.each do |what, (options, message)|
    it "names #{what} within seconds, as an AuthenticationError of every read" do
      error = refusal(monitor_of(provider(**options)))
      expect(error.kafka_error.message).to match(message)
    end
  end

  it "names an expired token the endpoint gives" do
    @idp.lifetime = -30
    error = refusal(monitor_of(provider))
    expect(error.kafka_error.message).to match(/gave a token that expired at/)
  end

  it "is refused by the broker for a token signed with a key its JWKS lacks (the validator checks signatures)" do
    forger = Object.new
    forger.extend(Sluice::Auth::TokenProvider)
    token = @idp.forged(IdentityProvider::CLIENT)
    forger.define_singleton_method(:token) do
      Sluice::Auth::TokenProvider::Token.new(token, (Time.now.to_i + 3600) * 1000, IdentityProvider::CLIENT, {})
    end
    error = refusal(monitor_of(forger))
    expect(error.kafka_error.code).to eq(:authentication)
  end
end
