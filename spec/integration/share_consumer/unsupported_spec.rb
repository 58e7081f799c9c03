# frozen_string_literal: true

# A share consumer against brokers without share groups (issue 57 item 4): Kafka 3.9, bin/test's broker.
# Its reads raise a named error within a second, not after a timeout of records that never come.
RSpec.describe Sluice::ShareConsumer, :kafka do
  before do
    skip "needs librdkafka 2.15.0's share consumer" unless Sluice::Native::ShareConsumer.supported?
    skip "needs a broker without share groups (Kafka before 4: bin/test's 3.9)" if TestKafka::VERSION >= Gem::Version.new("4.0")
  end

  it "raises ShareGroupsUnsupportedError from the first poll, at once" do
    consumer = described_class.new do |config|
      config.kafka = { "bootstrap.servers": TestKafka::BROKERS, "group.id": "sluice-spec-share-#{SecureRandom.hex(4)}" }
    end
    consumer.subscribe("sluice-spec-1p")
    error = expect_within(5, guards: "a poll waiting its 10 s for records that never come") do
      consumer.poll(10_000)
    rescue Sluice::Errors::ShareGroupsUnsupportedError => e
      e
    end
    expect(error).to be_a(Sluice::Errors::ShareGroupsUnsupportedError)
    expect(error.code).to eq(:unsupported_feature)
    expect(error.message).to include("ShareGroupHeartbeat")
  ensure
    consumer&.close(5_000)
  end
end
