# frozen_string_literal: true

# ShareConsumer.new's refusals (issue 57 item 4): what librdkafka lacks, and a consumer group's settings.
RSpec.describe Sluice::ShareConsumer do
  def validated(kafka = {}, acknowledgement: :implicit)
    config = Sluice::ShareConsumer::Config.new
    config.kafka = { "bootstrap.servers": "127.0.0.1:1", "group.id": "g" }.merge(kafka)
    config.acknowledgement = acknowledgement
    config.validate!
  end

  it "names every consumer-group-only setting given, and where a share group keeps it" do
    expect { validated({ "auto.offset.reset": "earliest", "enable.auto.commit": false, "session.timeout.ms": 6000 }) }
      .to raise_error(Sluice::Errors::ShareConsumerConfigError) { |error|
        expect(error.message).to include("auto.offset.reset (a share group has the group config share.auto.offset.reset",
                                         "enable.auto.commit", "session.timeout.ms (a share group has the group config share.session.timeout.ms")
      }
  end

  it "takes the acknowledgement mode as a setting of its own, not librdkafka's property" do
    expect { validated({ "share.acknowledgement.mode": "explicit" }) }
      .to raise_error(Sluice::Errors::ShareConsumerConfigError, /config\.acknowledgement/)
    expect { validated(acknowledgement: :manual) }.to raise_error(Sluice::Errors::ConfigurationInvalidError, /:implicit or :explicit/)
    expect(validated(acknowledgement: :explicit).acknowledgement).to eq(:explicit)
  end

  it "needs a group.id" do
    config = Sluice::ShareConsumer::Config.new
    config.kafka = { "bootstrap.servers": "127.0.0.1:1" }
    expect { config.validate! }.to raise_error(Sluice::Errors::ConfigurationInvalidError, /group\.id/)
  end

  it "adds librdkafka's cgrp debug context, keeping the ones given (the line telling brokers without share groups)" do
    expect(validated.native_pairs).to include(%w[debug cgrp])
    expect(validated({ debug: "broker" }).native_pairs.select { |name, _| name == "debug" }).to eq([%w[debug broker,cgrp]])
  end

  it "raises ShareConsumerUnavailableError at new on a librdkafka without the share consumer" do
    allow(Sluice::Native::ShareConsumer).to receive(:supported?).and_return(false)
    expect { described_class.new { |config| config.kafka = { "group.id": "g" } } }
      .to raise_error(Sluice::Errors::ShareConsumerUnavailableError, /librdkafka 2\.15\.0/)
  end

  it "refuses a consumer-group setting at new, before any handle exists",
     skip: !Sluice::Native::ShareConsumer.supported? && "needs librdkafka 2.15.0" do
    expect { described_class.new { |config| config.kafka = { "group.id": "g", "isolation.level": "read_committed" } } }
      .to raise_error(Sluice::Errors::ShareConsumerConfigError, /share\.isolation\.level/)
  end
end
