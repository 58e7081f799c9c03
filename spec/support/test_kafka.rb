# frozen_string_literal: true

# The broker the integration specs talk to (bin/kafka starts one; KAFKA_BROKERS
# points elsewhere), its SASL/OAUTHBEARER listener, and the topics created up front.
module TestKafka
  BROKERS = ENV.fetch("KAFKA_BROKERS", "127.0.0.1:#{ENV.fetch("KAFKA_PORT", "9092")}")
  SASL_BROKERS = ENV.fetch("KAFKA_SASL_BROKERS", "127.0.0.1:#{ENV.fetch("KAFKA_SASL_PORT", "9094")}")
  # bin/kafka's SASL_PLAINTEXT listener for SCRAM-SHA-512 and PLAIN, its SSL and SASL_SSL listeners,
  # the test user (SCRAM and PLAIN) and the CA that signed the broker's certificate (made at start).
  SCRAM_BROKERS = ENV.fetch("KAFKA_SCRAM_BROKERS", "127.0.0.1:#{ENV.fetch("KAFKA_SCRAM_PORT", "9095")}")
  SSL_BROKERS = ENV.fetch("KAFKA_SSL_BROKERS", "127.0.0.1:#{ENV.fetch("KAFKA_SSL_PORT", "9096")}")
  SASL_SSL_BROKERS = ENV.fetch("KAFKA_SASL_SSL_BROKERS", "127.0.0.1:#{ENV.fetch("KAFKA_SASL_SSL_PORT", "9097")}")
  USER = { "sasl.username": "alice", "sasl.password": "alice-secret" }.freeze
  TLS_CA = ENV.fetch("KAFKA_TLS_CA") { File.expand_path("../../tmp/kafka/#{BROKERS.split(",").first.split(":").last}/tls/ca.pem", __dir__) }
  MODE = ENV.fetch("SLUICE_POLLING_MODE", "fd").to_sym
  # The broker's Apache Kafka version: bin/kafka's KAFKA_VERSION (its default
  # when unset), or what a run against another broker says it is.
  VERSION = Gem::Version.new(ENV.fetch("KAFKA_VERSION", "3.9.1"))

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
    "sluice-spec-close" => [3, nil], # consumer/close_bounds_spec.rb
    "sluice-spec-gem" => [1, nil], # packaging/: installed gems round-trip messages
    "sluice-spec-interrupts" => [1, nil], # consumer/interrupted_reads_spec.rb
    "sluice-spec-poll-store" => [1, nil], # consumer/poll_store_spec.rb
    "sluice-spec-starts" => [1, nil], # consumer/assigned_start_spec.rb: never committed by its groups before
    "sluice-spec-turns" => [4, nil], # consumer/partition_turns_spec.rb
    ParallelReadsTopic::NAME => [3, nil], # consumer/parallel_spec.rb and the others of ParallelReads: one per rspec process
    "sluice-spec-failures" => [3, nil], # consumer/failure_policy_spec.rb: retries and dead letters
    "sluice-spec-failures-dlq" => [3, nil],
    "sluice-spec-retrying" => [3, nil], # consumer/retry_topics_spec.rb: retry_topics: [1, 2], its retry topics and DLQ
    "sluice-spec-retrying.retry.1s" => [3, nil],
    "sluice-spec-retrying.retry.2s" => [3, nil],
    "sluice-spec-retrying-dlq" => [3, nil],
    "sluice-spec-dlq-source" => [3, nil], # cli/dlq_spec.rb: dead letters read back and replayed
    "sluice-spec-dlq" => [3, nil],
    "sluice-spec-metrics" => [3, nil] # instrumentation/{prometheus,statsd}_listener_spec.rb (MetricsLoad)
  }.freeze

  class << self
    # Whether the broker runs KIP-848's consumer group protocol (on by default from Kafka 4.0).
    def group_protocol_consumer? = VERSION >= Gem::Version.new("4.0")

    # Whether bin/kafka can run Kafka's own tools (scram_user): its jars (bin/kafka fetch) and a JRE. A
    # checkout without them (bin/test-root's Debian root: no Java) skips what needs them.
    def tools? = Dir.exist?(File.expand_path("../../tmp/kafka/libs", __dir__)) && system("command -v java >/dev/null 2>&1")

    # Adds or changes a SCRAM-SHA-512 user on the broker (credentials rotated while a client retries).
    def scram_user(name, password)
      port = BROKERS.split(",").first.split(":").last
      command = [File.expand_path("../../bin/kafka", __dir__), "scram-user", name, password]
      out = IO.popen({ "KAFKA_PORT" => port }, command, err: %i[child out], &:read)
      raise "bin/kafka scram-user failed: #{out}" unless $?.success? # rubocop:disable Style/SpecialGlobalVars
    end

    def prepare!
      return if @prepared

      admin = Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": BROKERS } }
      TOPICS.each { |name, (partitions, configs)| create_topic(admin, name, partitions, configs) }
      admin.close
      warm_transactions(BROKERS, "sluice-spec-txn")
      @prepared = true
    end

    # One transaction, waited for as long as it takes: a fresh broker creates
    # its transaction state log and loads the coordinator on the first one
    # (seconds), which a spec's first transaction must not pay within its
    # own waits (a delivery report 5 s late failed CI once).
    def warm_transactions(brokers, topic)
      producer = Sluice::Producer.new do |config|
        # One id per process of a split run (bin/rspec-parallel): two warm-ups sharing one fenced each other.
        config.kafka = { "bootstrap.servers": brokers, "transactional.id": "sluice-spec-warm-up#{ENV.fetch("TEST_ENV_NUMBER", "")}" }
        config.max_wait_timeout = 60_000
        config.logger = Logger.new(nil)
      end
      producer.transaction { producer.produce_async(topic: topic, payload: "warm-up") }
    ensure
      producer&.close
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
