# frozen_string_literal: true

# Wrong credentials or TLS on an admin client (issue 29): every call family
# raises AuthenticationError with librdkafka's reason within about a second
# (a request whose result waits, and a blocking metadata read), and keeps
# doing so while the broker refuses, instead of a transport AdminError (or an
# empty answer) after max_wait_timeout. Against bin/kafka's SCRAM and SSL
# listeners.
RSpec.describe "Authentication and TLS failures on the admin client", :kafka do
  # The first refusal takes librdkafka a connection attempt; a later call is told at once or after
  # Sluice::Shared::RefusableRead::GRACE, or after one blocking slice: about a second. The bound tells that
  # from max_wait_timeout (30 s) with room for a loaded machine (CI once took 2.7 s for the TLS case).
  limit = 5

  def admin_with(kafka)
    admin = Sluice::Admin.new do |config|
      config.kafka = { "reconnect.backoff.max.ms": 10_000 }.merge(kafka)
      config.max_wait_timeout = 30_000 # a failure that is not named shows as a timeout after it
    end
    (@admins ||= []) << admin
    admin
  end

  after { @admins&.each(&:close) }

  def wrong_scram = { "bootstrap.servers": TestKafka::SCRAM_BROKERS, "security.protocol": "SASL_PLAINTEXT",
                      "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": "wrong" }

  # [error, seconds] of the block, which must raise AuthenticationError.
  def refused
    started = monotonic
    yield
    raise RSpec::Expectations::ExpectationNotMetError, "no AuthenticationError raised"
  rescue Sluice::Errors::AuthenticationError => e
    [e, monotonic - started]
  end

  calls = {
    "topics (a blocking metadata read)" => ->(admin) { admin.topics },
    "create_topic (a request)" => ->(admin) { admin.create_topic("sluice-spec-never", partitions: 1) },
    "committed_offsets (a request; never an empty answer)" => ->(admin) { admin.committed_offsets("sluice-spec-group") },
    "groups (a listing)" => ->(admin) { admin.groups },
    "watermark_offsets (a blocking read)" => ->(admin) { admin.watermark_offsets("sluice-spec-1p", 0) }
  }

  calls.each do |name, call|
    it "names a wrong SCRAM password from #{name}, within #{limit} s, first and later" do
      admin = admin_with(wrong_scram)
      times = Array.new(3) do
        error, took = refused { call.call(admin) }
        expect(error.code).to eq(:authentication)
        expect(error.kafka_error.message).to match(/SASL authentication error/)
        took
      end
      RSpec.configuration.reporter.message("    admin #{name.split.first}, wrong SCRAM password: #{times.map { |t| t.round(2) }.join(", ")} s")
      expect_elapsed(times.max, within: limit, guards: "max_wait_timeout (30 s): a failure not named")
    end
  end

  it "names an untrusted broker certificate (:ssl) from a request and a metadata read" do
    admin = admin_with("bootstrap.servers": TestKafka::SSL_BROKERS, "security.protocol": "SSL",
                       "ssl.ca.location": "/etc/ssl/certs/ca-certificates.crt")
    [-> { admin.create_topic("sluice-spec-never", partitions: 1) }, -> { admin.topics }].each do |call|
      error, took = refused(&call)
      expect(error.code).to eq(:ssl)
      expect_elapsed(took, within: limit, guards: "max_wait_timeout (30 s): a failure not named")
    end
  end

  it "still waits out a broker that is merely unreachable: no credentials refused, no AuthenticationError" do
    admin = Sluice::Admin.new do |config|
      config.kafka = { "bootstrap.servers": "127.0.0.1:1" }
      config.max_wait_timeout = 1_500
    end
    @admins = [admin]
    expect { admin.topics }.to raise_error(Sluice::Errors::AdminError) { |e| expect(e).not_to be_a(Sluice::Errors::AuthenticationError) }
  end

  it "answers once the credentials are right (the same calls, a correct password)" do
    admin = admin_with(wrong_scram.merge("sasl.password": "alice-secret"))
    expect(admin.topics).to include("sluice-spec-1p")
    expect(admin.committed_offsets("sluice-spec-group-#{SecureRandom.hex(4)}")).to eq({})
  end
end
