# frozen_string_literal: true

# Admin::Transport without a broker: the native client, the poll state and the poller are fakes, the
# requests real. What it promises: a result reaches its caller, a missing one times out with a clear message,
# a close or a refusal of the client's credentials ends the wait at once, and on the polling thread the call
# serves the queue itself instead of waiting for a poll that would never come.
RSpec.describe Sluice::Admin::Transport do
  subject(:transport) do
    described_class.new(admin_id: 7, requests: requests, state: state, poller: poller, timeout_ms: timeout_ms, client: client)
  end

  let(:requests) { Sluice::Admin::Requests.new }
  let(:timeout_ms) { 10_000 }
  let(:native) { Object.new }
  let(:client) { -> { native } }
  let(:poller) { Struct.new(:in_poller_thread?).new(false) }
  let(:refusal) { nil }
  # The poll state: what the brokers refused (nil: nothing), and a pump that serves the queue once.
  let(:state) do
    Struct.new(:refusal, :pumped) do
      def refusing_failure = refusal
      def pump = pumped&.call
    end.new(refusal)
  end
  let(:authentication) { Sluice::KafkaError.new(Sluice::KafkaError.number_for(:authentication)) }

  def monotonic = Sluice::Shared::Clock.now

  # Refuses once `waiter` sleeps (in the requests' wait): a refusal reported during the wait, not before it.
  # Whether the waiter was waiting by then.
  def refuse_once_waiting(waiter)
    deadline = monotonic + 5
    Thread.pass until waiter.status == "sleep" || monotonic > deadline
    waited = waiter.status == "sleep"
    requests.refuse
    waited
  end

  it "gives the block the native client, a request number and the timeout, and returns the result delivered for it" do
    result = transport.request(:create_topic, "t") do |client, id, ms|
      expect([client, ms]).to eq([native, timeout_ms])
      requests.deliver([id, 0, "", :payload])
      nil # the native call's answer: the request went out
    end

    expect(result).to eq([0, "", :payload])
  end

  it "returns at once what the native call answers when it refuses the request before sending it" do
    result = expect_within(1, guards: "the 10 s timeout, waiting for a result never to come") do
      transport.request(:incremental_alter_configs, "t") { [-186, "Invalid argument"] }
    end

    expect(result).to eq([-186, "Invalid argument"])
  end

  it "forgets the request afterwards, so a second result for its number is dropped" do
    used = nil
    transport.request(:create_topic, "t") { |_client, id, _ms| requests.deliver([used = id, 0, "", nil]) && nil }
    requests.deliver([used, 0, "again", nil])

    expect(requests.result(used)).to be_nil
  end

  context "with a short max_wait_timeout" do
    let(:timeout_ms) { 30 }

    it "answers librdkafka's timed-out code and says which timeout passed" do
      code, message, payload = transport.request(:describe_group, "g") { nil }

      expect([code, message, payload]).to eq([Sluice::KafkaError.number_for(:timed_out), "no result within max_wait_timeout (30 ms)", nil])
    end
  end

  context "when the native client was closed" do
    let(:client) { -> { raise Sluice::Errors::ProducerClosedError, "closed" } }

    it "raises AdminClosedError, naming the admin and the call, and forgets the request" do
      expect { transport.request(:delete_topic, "t") { raise "not reached" } }
        .to raise_error(Sluice::Errors::AdminClosedError, "admin 7 was closed during delete_topic t")
      expect(requests.instance_variable_get(:@pending)).to be_empty
    end
  end

  it "raises AdminClosedError when the admin closes while the call waits" do
    expect_within(1, guards: "the 10 s timeout") do
      expect { transport.request(:create_topic, "t") { requests.close && nil } }
        .to raise_error(Sluice::Errors::AdminClosedError, "admin 7 was closed during create_topic t")
    end
  end

  context "when the brokers refuse the client's credentials" do
    let(:refusal) { authentication }

    it "raises AuthenticationError as soon as a refusal is reported during the wait" do
      caller = Thread.current
      refuser = nil
      # Waiting out the grace takes it whole: anything under it told the two apart.
      expect_within(Sluice::Shared::RefusableRead::GRACE, guards: "the grace a late result gets (#{Sluice::Shared::RefusableRead::GRACE} s)") do
        expect { transport.request(:list_groups, nil) { refuser = Thread.new { refuse_once_waiting(caller) } and nil } }
          .to raise_error(Sluice::Errors::AuthenticationError) { |error| expect(error.kafka_error).to eq(authentication) }
      end
      expect(refuser.value).to be(true)
    end

    it "raises AuthenticationError for a refusal reported before, once the result is late, not at the timeout" do
      guards = "raising before the grace a late result gets (#{Sluice::Shared::RefusableRead::GRACE} s), or at the 10 s timeout"
      expect_within(5, at_least: Sluice::Shared::RefusableRead::GRACE, guards: guards) do
        expect { transport.request(:list_groups, nil) { nil } }.to raise_error(Sluice::Errors::AuthenticationError)
      end
    end
  end

  it "ignores a refusal nobody reports as current, and goes on waiting for the result" do
    result = transport.request(:list_groups, nil) do |_client, id, _ms|
      requests.refuse
      requests.deliver([id, 0, "", []])
      nil
    end

    expect(result).to eq([0, "", []])
  end

  context "when called on the polling thread (from a listener)" do
    let(:poller) { Struct.new(:in_poller_thread?).new(true) }

    it "serves the queue itself until its result arrives" do
      pumps = 0
      transport.request(:create_topic, "t") do |_client, id, _ms|
        state.pumped = -> { requests.deliver([id, 0, "", :pumped]) if (pumps += 1) == 3 }
        nil
      end => result

      expect([result, pumps]).to eq([[0, "", :pumped], 3])
    end
  end

  describe "#blocking" do
    it "returns the read's result, its wait bounded by max_wait_timeout" do
      result = transport.blocking(:watermarks, "t/0") { |client, ms| [0, client, ms] }

      expect(result.first(2)).to eq([0, native])
      expect(result.last).to be_between(1, timeout_ms)
    end

    it "raises AdminClosedError when the native client was closed" do
      expect { transport.blocking(:describe, nil) { raise Sluice::Errors::ProducerClosedError, "closed" } }
        .to raise_error(Sluice::Errors::AdminClosedError, "admin 7 was closed during describe ")
    end
  end
end
