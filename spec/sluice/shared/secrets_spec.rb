# frozen_string_literal: true

require "pp" # rubocop:disable Lint/RedundantRequireStatement -- PP itself, not only Kernel#pp
require "stringio"
require "tempfile"
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

RSpec.describe Sluice::Shared::Secrets do
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

  # An error's message and full_message, and its causes', all the way down (what an uncaught error's report prints).
  def told(error) = error ? [error.message, error.full_message, *told(error.cause)] : []

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

  it "leaves every secret out of the configuration errors sluice raises about a setting, and out of their causes" do
    errors = [
      # librdkafka quotes a value it refuses: here the password's, under another property
      lambda {
        Sluice::Producer.new do |c|
          c.kafka = { "bootstrap.servers": "127.0.0.1:1", "sasl.password": secrets["sasl.password"], "compression.codec": secrets["sasl.password"] }
        end
      },
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
      e
    end
    expect(errors).to all(be_a(Sluice::Errors::ConfigurationInvalidError)) # each was refused
    expect(errors.flat_map { |error| told(error) }.flat_map { |text| leaks(text) + text.scan(/s3cret-keystore/) }).to eq([])
    expect(errors.values_at(0, -1).map(&:message)).to all(include("[FILTERED]"))
  end

  # No broker: a fatal error of the test hooks, then a produce, which reloads.
  it "hands producer.reload's listeners the settings without a secret, and keeps each secret they leave FILTERED" do
    producer = Sluice::Producer.new do |config|
      config.kafka = { "bootstrap.servers": "127.0.0.1:1", "enable.idempotence": true }.merge(secrets.first(3).to_h)
      config.reload_on_idempotent_fatal_error = true
      config.wait_backoff_on_idempotent_fatal_error = 0
      config.logger = Logger.new(nil)
    end
    seen = Queue.new
    producer.monitor.subscribe("producer.reload") do |event|
      seen << [*printed(event), event.payload.inspect, event[:kafka].to_s]
      event[:kafka]["ssl.key.password"] = "a-new-key-password" # a secret a listener changes is taken
    end
    break_idempotence(producer.client, "spec")
    producer.produce_async(topic: "sluice-spec-secrets", payload: "x")
    expect(leaks(pop_within(seen).join)).to eq([])
    expect(%w[sasl.password ssl.key.password sasl.oauthbearer.config].map { |name| producer.config.kafka_setting(name) })
      .to eq([secrets["sasl.password"], "a-new-key-password", secrets["sasl.oauthbearer.config"]])
  ensure
    producer&.close! # the message waits for a broker that is not there
  end

  it "prints an oauthbearer.token_refresh event without sasl.oauthbearer.config, which its listener gets as it is" do
    seen = Queue.new
    monitor = Sluice::Monitor.new(logger: Logger.new(nil))
    monitor.subscribe("oauthbearer.token_refresh") { |event| seen << [event[:bearer_config], *printed(event)] }
    producer = Sluice::Producer.new do |config|
      config.kafka = { "bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                       "sasl.oauthbearer.config": secrets["sasl.oauthbearer.config"] }
      config.monitor = monitor
      config.logger = Logger.new(nil)
    end
    bearer_config, *texts = pop_within(seen)
    expect(bearer_config).to eq(secrets["sasl.oauthbearer.config"])
    expect(leaks(texts.join)).to eq([])
  ensure
    producer&.close
  end

  def usage_error(*argv)
    streams = Sluice::CLI::IOs.new(StringIO.new, StringIO.new, StringIO.new)
    expect(Sluice::CLI.start(["topics", "-b", "127.0.0.1:1", *argv], streams: streams, env: {})).to eq(2)
    expect(leaks(streams.stderr.string + streams.stdout.string)).to eq([])
    streams.stderr.string.lines.first
  end

  it "never echoes what may be a secret in the command line's usage errors" do
    password = secrets["sasl.password"]
    expect(usage_error("-X", "sasl.password:#{password}")).to include("-X takes KEY=VALUE", "sasl.password")
    # a malformed pair may hold its secret anywhere: named by its place
    ["=#{password}", password, "sasl.password#{password}"].each do |pair|
      expect(usage_error("-X", "client.id=x", "-X", pair)).to include("-X takes KEY=VALUE", "-X number 2")
    end
    expect(usage_error("-X", "sasl.password=#{password}\xff".b)).to include("argument 4 is not valid UTF-8")
    Tempfile.create("sluice-properties") do |file|
      file.write("client.id=x\n=#{password}\n")
      file.flush
      expect(usage_error("-F", file.path)).to include("#{file.path}:2: expected KEY=VALUE")
    end
  end
end
