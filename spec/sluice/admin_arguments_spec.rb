# frozen_string_literal: true

# Sluice::Admin refuses what Kafka would refuse, by name, before anything is
# sent (issue 27): names the broker drops the connection for or that failed
# in an encoding error, and numbers the native call raised RangeError for.
# No broker: the client points nowhere, and nothing here reaches it.
RSpec.describe Sluice::Admin do
  subject(:admin) do
    described_class.new do |config|
      config.kafka = { "bootstrap.servers": "127.0.0.1:1" }
      config.max_wait_timeout = 1_000
      config.logger = Logger.new(nil)
    end
  end

  after { admin.close }

  def refused(message = nil, &call)
    expect(&call).to raise_error(ArgumentError, message)
  end

  it "refuses topic names Kafka does not take: too long, other characters, non-ASCII, '.' and '..'" do
    ["x" * 250, "with space", "grüße", "a/b", ".", "..", "", "\xff".b, "\xE2\x28".dup.force_encoding("UTF-8")].each do |name|
      refused(/a topic name is/) { admin.create_topic(name) }
      refused(/a topic name is/) { admin.watermark_offsets(name, 0) }
    end
    refused(/a topic name is/) { admin.describe_configs(topic: "no way") }
  end

  it "takes the longest and every legal topic name without refusing it first" do
    expect(admin.send(:topic_name, "a" * 249)).to eq("a" * 249)
    expect(admin.send(:topic_name, :"Orders_2024.v1-x")).to eq("Orders_2024.v1-x")
  end

  it "refuses numbers outside Kafka's 32-bit fields by name instead of a RangeError" do
    refused(/partitions must be a positive Integer up to 2147483647/) { admin.create_topic("t", partitions: 2**31) }
    refused(/replication_factor must be a positive Integer/) { admin.create_topic("t", replication_factor: 2**40) }
    refused(/total must be a positive Integer/) { admin.create_partitions("t", 2**64) }
    refused(/a partition must be an Integer from 0 to 2147483647/) { admin.watermark_offsets("t", 2**31) }
    refused(/broker: takes a broker id/) { admin.describe_configs(broker: 2**33) }
    refused(/broker: takes a broker id/) { admin.describe_configs(broker: -1) }
  end

  # The native call stands in for the broker here: what is under test is the
  # retry policy around it (the real race, 2 of 140 rounds right after
  # create_topic, cannot be produced on demand).
  it "asks again while the partition's leader is not known yet, and names other errors at once" do
    client = admin.send(:open_client)
    not_leader = Sluice::KafkaError.number_for(:not_leader_for_partition)
    allow(client).to receive(:watermarks).and_return([not_leader, -1, -1], [not_leader, -1, -1], [0, 3, 8])
    expect(admin.watermark_offsets("t", 0)).to eq([3, 8])
    expect(client).to have_received(:watermarks).exactly(3).times

    allow(client).to receive(:watermarks).and_return([Sluice::KafkaError.number_for(:unknown_topic_or_part), -1, -1])
    expect { admin.watermark_offsets("t", 0) }.to raise_error(Sluice::Errors::UnknownTopicError)
  end

  it "refuses group ids that are not text Kafka can carry" do
    refused(/a group id is a non-empty String/) { admin.describe_group("") }
    refused(/a group id is a non-empty String/) { admin.committed_offsets("\xE2\x28".dup.force_encoding("UTF-8")) }
    refused(/a group id is a non-empty String/) { admin.delete_group("g" * 32_768) }
  end
end
