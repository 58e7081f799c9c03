# frozen_string_literal: true

# Sluice::Admin refuses what Kafka would refuse, by name, before anything is
# sent (issue 27): names the broker drops the connection for or that failed
# in an encoding error, and numbers the native call raised RangeError for.
# No broker: the client points nowhere, and nothing here reaches it.
RSpec.describe Sluice::Admin do
  subject(:admin) { build_unreachable_admin }

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
    refused(/a group id is a non-empty String of valid text without NUL bytes, .*got "a\\u0000b"/) { admin.describe_group("a\0b") }
  end

  # Kafka's offsets are 64-bit: past that the native call raised an unnamed RangeError.
  it "refuses reset_offsets offsets outside 0..2**63-1, naming the partition and the offset" do
    refused(/the offset for partition 0 must be an Integer from 0 to 9223372036854775807, got 9223372036854775808/) do
      admin.reset_offsets("g", "t", { 0 => 2**63 })
    end
    refused(/the offset for partition 3 must be an Integer from 0 to 9223372036854775807, got -1/) { admin.reset_offsets("g", "t", { 3 => -1 }) }
    refused(/the offset for partition 1 .* got -9223372036854775809/) { admin.reset_offsets("g", "t", { 0 => 0, 1 => -(2**63) - 1 }) }
    refused(/the offset for partition 2 .* got "5"/) { admin.reset_offsets("g", "t", { 2 => "5" }) }
    refused(/a partition must be an Integer from 0 to 2147483647, got 2147483648/) { admin.reset_offsets("g", "t", { 2**31 => 0 }) }
    refused(/a partition must be an Integer from 0 to 2147483647, got -1/) { admin.reset_offsets("g", "t", { -1 => 0 }) }
  end

  # A negative timestamp is a query, not a time: -1 answered the latest
  # offsets, -2 the earliest, -1000 was refused as unsupported_version.
  it "refuses a time before the epoch or past Kafka's 64-bit milliseconds, for offsets_for_time and reset_offsets" do
    before_epoch = /time must be at or after 1970-01-01 00:00:00 UTC and at most 9223372036854775807 ms after it, got 1969-12-31/
    [Time.at(-1), Time.at(-0.001), Time.at(Rational(-1, 10_000))].each do |time|
      refused(before_epoch) { admin.offsets_for_time("t", time.utc) }
      refused(before_epoch) { admin.reset_offsets("g", "t", time.utc) }
    end
    refused(/time must be at or after 1970-01-01 .* got 292278994-08-17/) { admin.offsets_for_time("t", Time.at(2**63 / 1000r).utc) }
    refused(/offsets_for_time takes a Time, got 0/) { admin.offsets_for_time("t", 0) }
  end

  it "takes the first and the last time Kafka's timestamps reach" do
    expect(admin.send(:timestamp_ms, Time.at(0))).to eq(0)
    expect(admin.send(:timestamp_ms, Time.at(((2**63) - 1) / 1000r))).to eq((2**63) - 1)
  end

  it "refuses a setting with a NUL byte, naming the argument, instead of the native call's bare \"string contains null byte\"" do
    refused(/set "retention.ms" has a NUL byte, which Kafka's C client cannot send, in "1\\u00002"/) do
      admin.alter_configs(topic: "t", set: { "retention.ms" => "1\u00002" })
    end
    refused(/delete has a NUL byte/) { admin.alter_configs(topic: "t", delete: ["cleanup\0policy"]) }
    refused(/config "a\\u0000" has a NUL byte/) { admin.create_topic("t", config: { "a\0" => "1" }) }
  end

  it "refuses a max_wait_timeout librdkafka's 32-bit int cannot carry (a call raised RangeError)" do
    expect { described_class.new { |config| config.max_wait_timeout = 2**31 } }
      .to raise_error(Sluice::Errors::ConfigurationInvalidError, /max_wait_timeout must be at most 2147483647 ms, got 2147483648/)
  end
end
