# frozen_string_literal: true

# Share groups (KIP-932) for the ShareConsumer specs: a broker that has them (Kafka 4.2 or later:
# bin/test-kafka4's 4.4.0, or SLUICE_SHARE_BROKERS), a librdkafka with the share consumer (2.15.0), and
# a group of each example's own whose configs shorten what the specs wait for.
module ShareGroups
  # One partition: the case share groups are for (more members than partitions).
  TOPIC_PARTITIONS = 1

  class << self
    # (A method: spec/support's files load in name order, TestKafka's after this one.)
    def brokers = ENV.fetch("SLUICE_SHARE_BROKERS") { TestKafka::BROKERS if TestKafka::VERSION >= Gem::Version.new("4.2") }

    # Why the share-group specs cannot run here, or nil.
    def skip_reason
      unless Sluice::Native::ShareConsumer.supported?
        return "needs librdkafka 2.15.0's share consumer (SLUICE_LIBRDKAFKA_VERSION=2.15.0 rake compile)"
      end

      "needs a broker with share groups, Kafka 4.2 or later (bin/test-kafka4, or SLUICE_SHARE_BROKERS)" unless brokers
    end
  end

  def share_admin
    @share_admin ||= Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": ShareGroups.brokers } }
  end

  def share_producer
    @share_producer ||= Sluice::Producer.new { |config| config.kafka = { "bootstrap.servers": ShareGroups.brokers } }
  end

  # A topic of the example's own (a share group reads a partition from its start, when told to).
  def share_topic
    @share_topic ||= "sluice-spec-share-#{SecureRandom.hex(4)}".tap { |name| share_admin.create_topic(name, partitions: TOPIC_PARTITIONS) }
  end

  # A group of the example's own, from the topic's start; configs: the group's others
  # (share.record.lock.duration.ms, share.delivery.count.limit: bin/kafka lowers their floors).
  def share_group(configs = {})
    "sluice-spec-share-#{SecureRandom.hex(4)}".tap do |group|
      share_admin.alter_configs(group: group, set: { "share.auto.offset.reset" => "earliest" }.merge(configs))
    end
  end

  def produce_share_records(count, topic = share_topic)
    count.times { |i| share_producer.produce_sync(topic: topic, payload: "record-#{i}", partition: 0) }
  end

  def share_consumer(group, acknowledgement: :implicit, kafka: {})
    consumer = Sluice::ShareConsumer.new do |config|
      config.kafka = { "bootstrap.servers": ShareGroups.brokers, "group.id": group }.merge(kafka)
      config.acknowledgement = acknowledgement
    end
    (@share_consumers ||= []) << consumer
    consumer
  end

  # Polls until `count` records came (a member's first records come once the broker assigned it), each
  # given to the block as it comes (explicit mode: it acknowledges, before the next poll).
  def poll_records(consumer, count, within: 30, &acknowledge)
    deadline = monotonic + within
    records = []
    while records.size < count && monotonic < deadline
      batch = consumer.poll(500)
      batch.each(&acknowledge) if acknowledge
      records.concat(batch)
    end
    records
  end

  def close_share_clients
    (@share_consumers || []).each { |consumer| consumer.close(5_000) }
    @share_producer&.close
    @share_admin&.close
  end
end

RSpec.configure do |config|
  config.include ShareGroups, :share_groups
  config.before(:each, :share_groups) { (reason = ShareGroups.skip_reason) && skip(reason) }
  config.after(:each, :share_groups) { close_share_clients }
end
