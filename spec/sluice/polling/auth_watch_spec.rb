# frozen_string_literal: true

# When an authentication or TLS failure counts as keeping every broker down
# (the poller then fails what is pending with it), in the orders of events
# librdkafka sends: 2.14 repeats all_brokers_down after each failed reconnect
# (the unchanged authentication error once); 2.0.2 repeats only the
# authentication error, once.
RSpec.describe Sluice::Polling::AuthWatch do
  subject(:watch) { described_class.new }

  let(:clock) { [100.0] }

  before { allow(watch).to receive(:now) { clock.first } }

  def error(code) = Sluice::KafkaError.new(Sluice::KafkaError.number_for(code), "#{code} reason")
  def observe(*codes) = codes.map { |code| watch.observe(error(code))&.code }
  def later(seconds) = clock[0] += seconds

  it "answers all_brokers_down after an authentication error with that error, at every failed attempt (librdkafka 2.14)" do
    expect(observe(:authentication, :all_brokers_down)).to eq([nil, :authentication])
    later(0.5)
    expect(observe(:authentication, :all_brokers_down)).to eq(%i[authentication authentication])
    10.times do # all_brokers_down alone keeps the failure current
      later(described_class::FRESH / 2.0)
      expect(observe(:all_brokers_down)).to eq([:authentication])
    end
  end

  it "counts a repeated authentication error as the next refusal when every broker was down already (librdkafka 2.0.2)" do
    expect(observe(:authentication, :all_brokers_down)).to eq([nil, :authentication])
    later(0.5)
    expect(observe(:authentication)).to eq([:authentication])
    later(0.5)
    expect(observe(:ssl)).to eq([:ssl])
  end

  it "takes an untrusted certificate reported as a transport error for the TLS failure it is (librdkafka 2.0.2)" do
    untrusted = Sluice::KafkaError.new(Sluice::KafkaError.number_for(:transport),
                                       "ssl://127.0.0.1:9096/bootstrap: error:0A000086:SSL routines::certificate verify failed " \
                                       "(after 17ms in state SSL_HANDSHAKE)")
    expect(watch.observe(untrusted)).to be_nil
    refusal = watch.observe(error(:all_brokers_down))
    expect([refusal.code, refusal.description]).to eq([:ssl, untrusted.description])
  end

  it "leaves a connection lost during a handshake a transport error (a broker restarting)" do
    lost = Sluice::KafkaError.new(Sluice::KafkaError.number_for(:transport),
                                  "ssl://127.0.0.1:9096/bootstrap: Disconnected (after 3ms in state SSL_HANDSHAKE)")
    expect([watch.observe(lost), watch.observe(error(:all_brokers_down))]).to eq([nil, nil])
  end

  it "says nothing of all_brokers_down without a current failure, or of an authentication error alone" do
    expect(observe(:all_brokers_down, :authentication, :transport)).to eq([nil, nil, nil])
  end

  it "forgets brokers being down once the failure is stale (credentials rotated, then refused again)" do
    observe(:authentication, :all_brokers_down)
    later(described_class::FRESH + 1)
    expect(watch.current).to be_nil
    expect(observe(:all_brokers_down)).to eq([nil])
    expect(observe(:authentication)).to eq([nil]) # a broker may be up: wait for all_brokers_down again
    expect(observe(:all_brokers_down)).to eq([:authentication])
  end
  describe "a failure the brokers got over" do
    subject(:watch) { described_class.new(progress: -> { progress.first }) }

    let(:progress) { [0] }

    it "explains no all_brokers_down after the client delivered or fetched since (a broker restarting purges nothing)" do
      expect(observe(:authentication, :all_brokers_down)).to eq([nil, :authentication])
      progress[0] += 1 # credentials fixed: librdkafka reconnected (it says nothing) and messages went through
      later(5)
      expect(observe(:all_brokers_down)).to eq([nil])
      expect(watch.current).to be_nil
    end

    it "still explains it while nothing went through" do
      expect(observe(:authentication, :all_brokers_down)).to eq([nil, :authentication])
      later(5)
      expect(observe(:all_brokers_down)).to eq([:authentication])
      expect(watch.current.code).to eq(:authentication)
    end

    it "is named again when it comes back after progress" do
      observe(:authentication, :all_brokers_down)
      progress[0] += 10
      later(1)
      expect(observe(:authentication, :all_brokers_down)).to eq([nil, :authentication])
    end
  end
end
