# frozen_string_literal: true

# The values sluice acts on, read as librdkafka reads them (rdkafka_conf.c,
# rd_kafka_anyconf_set_prop). Each spelling here was checked against
# rd_kafka_conf_set and rd_kafka_conf_get of the bundled librdkafka 2.14.2.
RSpec.describe Sluice::Shared::KafkaProperty do
  def read(name, given) = described_class::ALL.fetch(name).read(given)

  def refused(name, given)
    expect { read(name, given) }.to raise_error(ArgumentError, /\A#{Regexp.escape(name)} must be /)
  end

  it "reads a boolean as librdkafka does: true/t and false/f in any case, 1 and 0" do
    %w[true TRUE True t T 1].each { |given| expect(read("enable.auto.commit", given)).to be(true), given }
    %w[false FALSE False f F 0].each { |given| expect(read("enable.auto.commit", given)).to be(false), given }
    ["yes", "no", "on", "2", " true", "1 ", "", "1.0"].each { |given| refused("enable.auto.commit", given) }
  end

  it "reads a choice in any case, trimmed on the left only (librdkafka's right trim trims nothing)" do
    expect(read("group.protocol", "CONSUMER")).to eq("consumer")
    expect(read("group.protocol", " Classic")).to eq("classic")
    expect(read("isolation.level", "READ_UNCOMMITTED")).to eq("read_uncommitted")
    ["consumer ", "kip848", ""].each { |given| refused("group.protocol", given) }
  end

  it "reads an integer as strtol(value, &end, 0): base from the prefix, digits up to the first other character" do
    { "300000" => 300_000, " 0x10" => 16, "010" => 8, "60000ms" => 60_000, "+7" => 7, "1e5" => 1,
      "4294967297" => 1, "99999999999999999999" => -1 } # strtol's long (saturated) cast to int
      .each { |given, value| expect(read("max.poll.interval.ms", given)).to eq(value), given }
    ["ms", "-", "x10", ""].each { |given| refused("max.poll.interval.ms", given) }
  end

  it "takes an empty string as no value: the default of a string property" do
    expect(read("transactional.id", "")).to be_nil
    expect(read("transactional.id", "  tx")).to eq("tx")
  end

  it "gives librdkafka's default for a property not given" do
    expect(described_class::ALL.transform_values { |property| property.read(nil) })
      .to include("enable.auto.commit" => true, "enable.idempotence" => false, "group.protocol" => "classic",
                  "max.poll.interval.ms" => 300_000, "session.timeout.ms" => 45_000, "transaction.timeout.ms" => 60_000,
                  "transactional.id" => nil)
  end
end
