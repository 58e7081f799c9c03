# frozen_string_literal: true

# The broker the integration specs talk to (bin/kafka starts one; KAFKA_BROKERS
# points elsewhere), its SASL/OAUTHBEARER listener, and the topics created up front.
module TestKafka
  BROKERS = ENV.fetch("KAFKA_BROKERS", "127.0.0.1:#{ENV.fetch("KAFKA_PORT", "9092")}")
  SASL_BROKERS = ENV.fetch("KAFKA_SASL_BROKERS", "127.0.0.1:#{ENV.fetch("KAFKA_SASL_PORT", "9094")}")
  MODE = ENV.fetch("SLUICE_POLLING_MODE", "fd").to_sym

  # name => [partitions, topic configs]
  TOPICS = {
    "sluice-spec-1p" => [1, nil],
    "sluice-spec-3p" => [3, nil],
    "sluice-spec-many" => [1, nil],
    "sluice-spec-txn" => [1, nil],
    "sluice-spec-small" => [1, [["max.message.bytes", "2000"]]],
    "sluice-spec-bench" => [1, nil],
    "sluice-spec-consumer" => [3, nil],
    "sluice-spec-idle" => [1, nil], # nothing is ever produced to it
    "sluice-spec-idle-reads" => [1, nil],
    "sluice-spec-slow" => [1, nil],
    "sluice-spec-positions" => [1, nil], # consumer/positions_spec.rb: one partition, read from a known offset
    "sluice-spec-keys" => [6, nil], # producer/key_partitioning_spec.rb
    # Consumer groups (spec/integration/consumer/groups_spec.rb) and crash
    # recovery (consumer/crash_recovery_spec.rb): input and a transform's output.
    "sluice-spec-cgroup" => [6, nil],
    "sluice-spec-cgroup-out" => [3, nil],
    "sluice-spec-close" => [3, nil] # consumer_close_bounds_spec.rb
  }.freeze

  class << self
    def prepare!
      return if @prepared

      admin = Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": BROKERS } }
      TOPICS.each { |name, (partitions, configs)| create_topic(admin, name, partitions, configs) }
      admin.close
      @prepared = true
    end

    private

    def create_topic(admin, name, partitions, configs)
      admin.create_topic(name, partitions: partitions, config: (configs || []).to_h)
    rescue Sluice::Errors::TopicAlreadyExistsError
      nil
    rescue Sluice::Errors::BaseError => e
      raise "cannot create topic #{name}: #{e.message} (is the broker at #{BROKERS} up? bin/kafka start)"
    end
  end
end
