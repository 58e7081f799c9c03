# frozen_string_literal: true

# Wrong credentials or TLS: librdkafka knows within a second (an :authentication
# or :ssl error, then every broker down); the caller gets an AuthenticationError
# carrying that reason, not a timeout after max_wait_timeout or
# message.timeout.ms. Against bin/kafka's SCRAM/PLAIN, SSL and SASL_SSL listeners.
RSpec.describe "Authentication and TLS failures on the producer", :kafka do
  include PollingScenarios

  let(:topic) { "sluice-spec-1p" }
  # Long waits: a failure that is not named would show as a timeout after them.
  let(:patience) { 30_000 }

  def scram(password:, user: "alice", brokers: TestKafka::SCRAM_BROKERS, protocol: "SASL_PLAINTEXT", **kafka)
    { "bootstrap.servers": brokers, "security.protocol": protocol, "sasl.mechanisms": "SCRAM-SHA-512",
      "sasl.username": user, "sasl.password": password, "reconnect.backoff.max.ms": 500 }.merge(kafka)
  end

  def producer_with(kafka) = build_producer(kafka: kafka, max_wait_timeout: patience)

  # The AuthenticationError the block raised.
  def refusal
    yield
    raise RSpec::Expectations::ExpectationNotMetError, "no AuthenticationError raised"
  rescue Sluice::Errors::AuthenticationError => e
    e
  end

  # The AuthenticationError the block raised, within `limit` seconds.
  def auth_error_within(limit, &block)
    expect_within(limit, guards: "max_wait_timeout (30 s): a refusal not named") { refusal(&block) }
  end

  # Seconds until the block raised AuthenticationError.
  def seconds_to_refusal(&block)
    started = monotonic
    refusal(&block)
    monotonic - started
  end

  it "raises AuthenticationError from produce_sync with a wrong SCRAM password, with librdkafka's reason" do
    producer = producer_with(scram(password: "wrong"))

    error = auth_error_within(5) { producer.produce_sync(topic: topic, payload: "x") }
    expect(error.code).to eq(:authentication)
    expect(error.kafka_error.message).to match(/SASL authentication error.*invalid credentials/)
  end

  # librdkafka says so again at each failed reconnect (2.14.2: all_brokers_down
  # each time). 2.0.2 repeats the authentication error once, then stays silent
  # while nothing changes: later messages wait for message.timeout.ms there
  # (docs/BUILDING.md, "What the system's librdkafka lacks").
  it "raises it again for what is produced later, while the broker still refuses",
     skip: (Gem::Version.new(Sluice.librdkafka_version) < Gem::Version.new("2.14") &&
            "librdkafka #{Sluice.librdkafka_version} stops repeating an unchanged authentication failure") do
    producer = producer_with(scram(password: "wrong"))

    auth_error_within(5) { producer.produce_sync(topic: topic, payload: "x") }
    3.times { |i| auth_error_within(5) { producer.produce_sync(topic: topic, payload: "again #{i}") } }
  end

  it "resolves pending handles with it and raises it from flush" do
    producer = producer_with(scram(password: "wrong", "sasl.mechanisms": "PLAIN"))
    handles = Array.new(3) { |i| producer.produce_async(topic: topic, payload: "pending #{i}") }

    auth_error_within(5) { producer.flush(patience) }
    handles.each do |handle|
      expect { handle.wait(max_wait_timeout: 0) }.to raise_error(Sluice::Errors::AuthenticationError, /authentication/i)
    end
  end

  # librdkafka's reconnect backoff grows to reconnect.backoff.max.ms (10 s by
  # default), and it says so again only at each failed reconnect: without the
  # refusal already known, later calls waited for it (1.3-5 s, or
  # WaitTimeoutError and a flush that returned false after 5 s). A backoff of
  # 5 s from the start (3.75-7.5 s with librdkafka's jitter) puts every call
  # after the first refusal in that gap; 3 s stays below its shortest.
  it "raises it within 3 s from produce_sync, flush_sync and flush made between two reconnects" do
    producer = producer_with(scram(password: "wrong", "reconnect.backoff.ms": 5_000, "reconnect.backoff.max.ms": 10_000))
    auth_error_within(5) { producer.produce_sync(topic: topic, payload: "first") }

    times = Array.new(2) do |i|
      [seconds_to_refusal { producer.produce_sync(topic: topic, payload: "later #{i}") },
       seconds_to_refusal { producer.buffer(topic: topic, payload: "buffered #{i}") && producer.flush_sync },
       seconds_to_refusal { producer.produce_async(topic: topic, payload: "async #{i}") && producer.flush(patience) }]
    end
    shown = times.map { |row| row.map { |t| t.round(2) }.join("/") }.join(", ")
    RSpec.configuration.reporter.message("    produce_sync/flush_sync/flush refused later: #{shown} s")
    expect_elapsed(times.flatten.max, within: 3, guards: "the next reconnect, 3.75 s or more away: a refusal not yet known")
  end

  it "raises it from partition_count within 5 s, not after max_wait_timeout (30 s), first and later" do
    producer = producer_with(scram(password: "wrong"))

    3.times do |i|
      error = auth_error_within(5) { producer.partition_count("#{topic}-#{i}") } # not cached: a metadata read each
      expect(error.code).to eq(:authentication)
    end
  end

  it "raises it from a transaction, whose init_transactions used to wait forever" do
    producer = producer_with(scram(password: "wrong", "transactional.id": "sluice-spec-auth-#{rand(1 << 30)}"))

    error = auth_error_within(5) { producer.transaction { producer.produce_sync(topic: topic, payload: "x") } }
    expect(error.code).to eq(:authentication)
  end

  it "raises it with code :ssl when the broker's certificate is not trusted" do
    producer = producer_with("bootstrap.servers": TestKafka::SSL_BROKERS, "security.protocol": "SSL",
                             "ssl.ca.location": "/etc/ssl/certs/ca-certificates.crt", "reconnect.backoff.max.ms": 500)

    error = auth_error_within(5) { producer.produce_sync(topic: topic, payload: "x") }
    expect(error.code).to eq(:ssl)
    expect(error.kafka_error.message).to match(/certificate verify failed/)
  end

  it "delivers over SSL and SASL_SSL with the test CA, and with good SCRAM and PLAIN credentials" do
    tls = { "ssl.ca.location": TestKafka::TLS_CA }
    settings = [
      { "bootstrap.servers": TestKafka::SSL_BROKERS, "security.protocol": "SSL", **tls },
      scram(password: "alice-secret", brokers: TestKafka::SASL_SSL_BROKERS, protocol: "SASL_SSL", **tls),
      scram(password: "alice-secret"),
      scram(password: "alice-secret", "sasl.mechanisms": "PLAIN")
    ]
    settings.each { |kafka| expect(producer_with(kafka).produce_sync(topic: topic, payload: "secured").error).to be_nil }
  end

  it "stays alive and delivers once the broker accepts the credentials (rotated)" do
    skip "bin/kafka scram-user needs Kafka's jars (bin/kafka fetch) and Java" unless TestKafka.tools?
    user = "rotated-#{rand(1 << 30)}"
    producer = producer_with(scram(user: user, password: "new-secret"))
    expect { producer.produce_sync(topic: topic, payload: "refused") }.to raise_error(Sluice::Errors::AuthenticationError)

    TestKafka.scram_user(user, "new-secret")

    # A reconnect that failed before the broker had the user may still be
    # reported: the messages it refused fail, and the next ones get through.
    deadline = monotonic + 20
    begin
      report = producer.produce_sync(topic: topic, payload: "accepted now")
    rescue Sluice::Errors::AuthenticationError
      retry if monotonic < deadline
      raise
    end
    expect(report.error).to be_nil
  end
end
