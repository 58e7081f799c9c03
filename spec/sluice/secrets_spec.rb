# frozen_string_literal: true

require "pp" # rubocop:disable Lint/RedundantRequireStatement -- PP itself, not only Kernel#pp
require "stringio"
require "sluice/cli"

# No secret in any string sluice makes (issue 41): every client kind's config
# and client, built with known secret strings in every sensitive property
# (Symbol and String keys), then each way one is printed: inspect, pp, to_s,
# the NoMethodError of a mistyped setting, sluice's and librdkafka's
# configuration errors, librdkafka's own log lines (debug on), the command
# line's usage errors. None may hold a secret. No broker needed: the clients
# point at a closed port.
module SecretsSpec
  # A Logger's device that puts each line on a queue: the example waits on it, not on the clock.
  LineQueue = Struct.new(:queue) do
    def write(line) = queue << line
    def close = nil
  end
end

RSpec.describe Sluice::Secrets do
  secrets = { # the first three: what a client of this build takes (no libcurl: no OIDC client secret)
    "sasl.password" => "s3cret-sasl-password",
    "ssl.key.password" => "s3cret-key-password",
    "sasl.oauthbearer.config" => "principal=s3cret-principal",
    "sasl.oauthbearer.client.secret" => "s3cret-client-secret",
    "ssl.key.pem" => "-----BEGIN PRIVATE KEY-----s3cret-pem",
    "ssl.keystore.password" => "s3cret-keystore-password"
  }
  # The same secrets under Symbol keys: the spelling must not matter.
  symbol_secrets = secrets.to_h { |name, value| [name.to_sym, value.sub("s3cret", "symb0l-s3cret")] }
  all = secrets.values + symbol_secrets.values
  define_method(:all_secrets) { all }

  def leaks(text) = all_secrets.select { |secret| text.to_s.include?(secret) }

  def printed(object) = [object.inspect, object.to_s, PP.pp(object, +"")]

  it "knows the sensitive properties by name, whatever the spelling, and leaves the others be" do
    sensitive = %w[sasl.password ssl.key.password ssl.keystore.password ssl.keystore.location ssl.key.pem sasl.oauthbearer.client.secret
                   sasl.oauthbearer.config https.ssl.key.password sasl.oauthbearer.assertion.private.key.passphrase]
    expect(sensitive + sensitive.map(&:to_sym) + sensitive.map(&:upcase)).to all(satisfy { |name| described_class.sensitive?(name) })
    plain = %w[bootstrap.servers sasl.username sasl.mechanism security.protocol ssl.ca.location sasl.oauthbearer.token.endpoint.url
               sasl.oauthbearer.client.id group.id transactional.id]
    expect(plain.select { |name| described_class.sensitive?(name) }).to eq([])
  end

  {
    Sluice::Producer => {},
    Sluice::Consumer => { "group.id": "sluice-secrets-spec" },
    Sluice::Admin => {}
  }.each do |client_class, required|
    describe client_class do
      let(:kafka) { { "bootstrap.servers": "127.0.0.1:1" }.merge(required, secrets.first(3).to_h, symbol_secrets.first(3).to_h) }

      it "prints its config and itself without a secret: inspect, to_s, pp, librdkafka's debug log, event payloads" do
        lines = Queue.new
        monitor = Sluice::Monitor.new(logger: Logger.new(nil))
        payloads = Queue.new # every event the client emits, as printed
        Sluice::Monitor::EVENTS.each { |name| monitor.subscribe(name) { |event| payloads << "#{name} #{event.payload.inspect}" } }
        client = client_class.new do |config|
          config.kafka = kafka.merge(debug: "conf,security,generic,broker")
          config.logger = Logger.new(SecretsSpec::LineQueue.new(lines), level: Logger::DEBUG)
          config.monitor = monitor
        end
        texts = [*printed(client.config), *printed(client)]
        expect(client.config.inspect.scan("[FILTERED]").size).to eq(6) # three secrets under String keys, three under Symbol keys
        Timeout.timeout(10) { texts << lines.pop } # librdkafka's debug lines come (the broker's refused connect, at least)
        client.close
        texts << lines.pop until lines.empty?
        expect(payloads).not_to be_empty # its lifecycle events at least
        texts << payloads.pop until payloads.empty?
        expect(texts.flat_map { |text| leaks(text) }).to eq([])
      end

      it "names a mistyped setting without a secret in the NoMethodError" do
        config = client_class::Config.new
        config.kafka = kafka
        expect { config.max_wait_timeotu = 5 }.to raise_error(NoMethodError) { |error|
          expect(leaks(error.message) + leaks(error.full_message)).to eq([])
        }
      end
    end
  end

  it "prints a producer's variant and a pool of producers without a secret" do
    kafka = { "bootstrap.servers": "127.0.0.1:1" }.merge(secrets.first(3).to_h)
    producer = Sluice::Producer.new { |config| config.kafka = kafka }
    variant = producer.variant(topic_config: { acks: 1 })
    pool = Sluice::ProducerPool.new(size: 1) { |config| config.kafka = kafka }
    pool.with { |pooled| expect(leaks(printed(pooled).join)).to eq([]) }
    expect([variant, pool].flat_map { |object| leaks(printed(object).join) }).to eq([])
  ensure
    producer&.close
    pool&.shutdown
  end

  it "leaves every secret out of the configuration errors sluice raises about a setting" do
    errors = [
      -> { Sluice::Producer.new { |c| c.kafka = { "bootstrap.servers": "127.0.0.1:1", "sasl.password": [secrets["sasl.password"]] } } },
      -> { Sluice::Producer.new { |c| c.kafka = { "bootstrap.servers": "127.0.0.1:1", "ssl.key.password" => { k: secrets["ssl.key.password"] } } } },
      # librdkafka's own words: it names the keystore file it could not open
      lambda {
        Sluice::Producer.new do |c|
          c.kafka = { "bootstrap.servers": "127.0.0.1:1", "security.protocol": "ssl", "ssl.keystore.location": "/nonexistent/s3cret-keystore.p12",
                      "ssl.keystore.password": secrets["ssl.keystore.password"] }
        end
      }
    ].map do |build|
      build.call
      nil
    rescue Sluice::Errors::ConfigurationInvalidError => e
      e.message
    end
    expect(errors).to all(be_a(String)) # each was refused
    expect(errors.flat_map { |message| leaks(message) + [message].grep(/s3cret-keystore/) }).to eq([])
    expect(errors.last).to include("[FILTERED]")
  end

  it "never echoes what may be a secret in the command line's usage errors" do
    streams = Sluice::CLI::IOs.new(StringIO.new, StringIO.new, StringIO.new)
    code = Sluice::CLI.start(["topics", "-b", "127.0.0.1:1", "-X", "sasl.password:#{secrets["sasl.password"]}"], streams: streams, env: {})
    expect(code).to eq(2)
    expect(streams.stderr.string).to include("-X takes KEY=VALUE", "sasl.password")
    expect(leaks(streams.stderr.string + streams.stdout.string)).to eq([])
  end
end
