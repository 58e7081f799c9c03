# frozen_string_literal: true

# SASL GSSAPI (Kerberos) with the build under test: this checkout's links the
# system's Cyrus SASL (libsasl2-dev at build time, its GSSAPI plugin
# libsasl2-modules-gssapi-mit where it runs; bin/setup installs both), the
# precompiled gems MIT Kerberos and Cyrus SASL of their own (their spec). A
# realm of the spec's own (spec/support/kerberos.rb: MIT's KDC, a broker
# offering GSSAPI on ports 9392-9397), so it runs in the pass with brokers of
# their own (bin/test: SLUICE_OWN_BROKER_SPECS=1). librdkafka gets the
# client's tickets by running kinit from its keytab, as users configure it;
# this process finds the realm through KRB5_CONFIG.
RSpec.describe "SASL GSSAPI (Kerberos)", :kafka, :own_broker do
  before(:context) do
    missing = Kerberos.missing_tools
    raise "the realm needs MIT Kerberos's #{missing.join(", ")} (bin/setup installs krb5-kdc, krb5-admin-server, krb5-user)" if missing.any?

    Kerberos.start
    @saved_env = Kerberos.env.keys.to_h { |name| [name, ENV.fetch(name, nil)] }
    ENV.update(Kerberos.env) # librdkafka's Kerberos (and the kinit it runs) read the process's environment
  end

  after(:context) do
    ENV.update(@saved_env) if @saved_env
    Kerberos.stop
  end

  def clients = (@clients ||= [])

  def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  after { clients.each(&:close) }

  def kafka(**more) = Kerberos.client_config.merge("reconnect.backoff.max.ms": 500).merge(more)

  def producer(**more)
    client = Sluice::Producer.new do |config|
      config.kafka = kafka(**more)
      config.polling.mode = TestKafka::MODE
      config.logger = Logger.new(nil)
    end
    clients << client
    client
  end

  it "produces, reads back and administers over GSSAPI, from the keytab through librdkafka's kinit" do
    tickets = Kerberos.service_tickets
    payload = "gssapi #{rand(1 << 30)}"
    report = producer.produce_sync(topic: Kerberos::TOPIC, partition: 0, payload: payload)
    expect(report.error).to be_nil

    consumer = Sluice::Consumer.new do |config|
      config.kafka = kafka("group.id": "sluice-spec-gssapi-#{rand(1 << 30)}")
      config.polling.mode = TestKafka::MODE
    end
    clients << consumer
    consumer.assign(Kerberos::TOPIC => { 0 => report.offset })
    message = nil
    deadline = monotonic + 30
    message = consumer.poll(500) until message || monotonic > deadline
    expect(message&.payload).to eq(payload)

    admin = Sluice::Admin.new { |config| config.kafka = kafka }
    clients << admin
    expect(admin.topics).to include(Kerberos::TOPIC)
    expect(Kerberos.service_tickets).to be > tickets # each client asked the KDC for kafka/127.0.0.1
  end

  # kinit fails (the keytab has no key for the principal) and GSSAPI then
  # finds no credentials: the call names that, long before the message's timeout.
  it "raises AuthenticationError with GSSAPI's reason for a principal the keytab has no key for" do
    # A cache of its own: the other example's still holds sluice-client's ticket, which would do.
    ENV["KRB5CCNAME"] = "FILE:#{File.join(Kerberos::DIR, "ccache-nobody-#{TestKafka::MODE}")}"
    refused = producer("sasl.kerberos.principal": "nobody", "message.timeout.ms": 30_000)
    # No wall-clock bound: produce_sync waits max_wait_timeout (5 s), then raises WaitTimeoutError, not this.
    expect { refused.produce_sync(topic: Kerberos::TOPIC, partition: 0, payload: "refused") }
      .to raise_error(Sluice::Errors::AuthenticationError, /GSSAPI Error.*No Kerberos credentials available/)
  ensure
    ENV.update(Kerberos.env)
  end
end
