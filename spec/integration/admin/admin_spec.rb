# frozen_string_literal: true

require "timeout"

# Sluice::Admin against the real broker, in the polling mode under test
# (SLUICE_POLLING_MODE). Every example makes its own topics and groups (a
# random suffix) and deletes them.
RSpec.describe Sluice::Admin, :kafka do
  include ConsumerGroups
  include PollingScenarios

  let(:suffix) { "#{Process.pid}-#{rand(1 << 30)}" }
  let(:topic) { "sluice-spec-admin-#{suffix}" }
  let(:group) { "sluice-spec-admin-group-#{suffix}" }
  let(:admin) { build_admin }
  let(:created) { [] }

  def build_admin(brokers: TestKafka::BROKERS, kafka: {}, **settings)
    admin = described_class.new do |config|
      config.kafka = { "bootstrap.servers": brokers }.merge(kafka)
      config.polling.mode = TestKafka::MODE
      config.logger = Logger.new(nil)
      settings.each { |name, value| config.public_send(:"#{name}=", value) }
    end
    admins << admin
    admin
  end

  def admins = (@admins ||= [])

  def create(name = topic, **options)
    admin.create_topic(name, **options)
    created << name
    name
  end

  after do
    created.each do |name|
      admin.delete_topic(name)
    rescue Sluice::Errors::UnknownTopicError, Sluice::Errors::AdminClosedError
      nil
    end
    admins.each(&:close)
  end

  def produce(name, count, partition: 0)
    producer = build_producer
    handles = Array.new(count) { |i| producer.produce_async(topic: name, partition: partition, payload: "m#{i}") }
    handles.map(&:wait)
  ensure
    producer&.close
  end

  describe "topics" do
    it "creates the retry topics of a topic, with its partition count, and leaves those that exist" do
      create(topic, partitions: 2)
      names = %W[#{topic}.retry.1s #{topic}.retry.30s]
      created << names.last
      create(names.first, partitions: 1)
      expect(admin.create_retry_topics(topic, [1, 30])).to eq(names)
      expect(names.map { |name| admin.describe_topic(name)[:partitions].size }).to eq([1, 2])
      expect { admin.create_retry_topics(topic, [30, 1]) }.to raise_error(ArgumentError, /ascending/)
    end

    it "creates a topic with partitions and settings, lists, describes, grows and deletes it" do
      expect(admin.create_topic(topic, partitions: 2, replication_factor: 1, config: { "cleanup.policy" => "compact" })).to be_nil
      created << topic

      expect(admin.topics).to include(topic)
      expect(admin.topics).not_to include("__consumer_offsets")
      broker = admin.cluster[:brokers].first[:id]
      expect(admin.describe_topic(topic)).to eq(
        name: topic, partitions: [0, 1].map { |p| { partition: p, leader: broker, replicas: [broker], isr: [broker] } }
      )
      expect(admin.describe_configs(topic: topic)).to include("cleanup.policy" => "compact")

      admin.create_partitions(topic, 3)
      expect(admin.describe_topic(topic)[:partitions].map { |p| p[:partition] }).to eq([0, 1, 2])

      admin.delete_topic(topic)
      expect { admin.describe_topic(topic) }.to raise_error(Sluice::Errors::UnknownTopicError)
    end

    it "names what the broker refuses, carrying the KafkaError" do
      create
      expect { admin.create_topic(topic) }.to raise_error(Sluice::Errors::TopicAlreadyExistsError) { |e|
        expect(e.kafka_error.code).to eq(:topic_already_exists)
      }
      expect { admin.create_topic("#{topic}-rf", replication_factor: 9) }.to raise_error(Sluice::Errors::InvalidAdminRequestError)
      expect { admin.create_partitions(topic, 1) }.to raise_error(Sluice::Errors::InvalidAdminRequestError) # fewer, not more
      expect { admin.delete_topic("#{topic}-missing") }.to raise_error(Sluice::Errors::UnknownTopicError)
      expect { admin.describe_configs(topic: "#{topic}-missing") }.to raise_error(Sluice::Errors::UnknownTopicError)
    end

    it "refuses bad arguments before anything is sent" do
      expect { admin.create_topic("") }.to raise_error(ArgumentError)
      expect { admin.create_topic(topic, partitions: 0) }.to raise_error(ArgumentError)
      expect { admin.create_topic(topic, config: "x") }.to raise_error(ArgumentError)
      expect { admin.create_partitions(topic, "3") }.to raise_error(ArgumentError)
      expect { admin.describe_configs }.to raise_error(ArgumentError)
      expect { admin.describe_configs(topic: topic, broker: 1) }.to raise_error(ArgumentError)
      expect { admin.watermark_offsets(topic, -1) }.to raise_error(ArgumentError)
      expect { admin.offsets_for_time(topic, 123) }.to raise_error(ArgumentError)
      expect { admin.reset_offsets(group, topic, :middle) }.to raise_error(ArgumentError)
      expect(admin.topics).not_to include(topic)
    end
  end

  describe "configs" do
    it "alters settings incrementally: what is not named stays" do
      create(config: { "cleanup.policy" => "compact" })
      admin.alter_configs(topic: topic, set: { "retention.ms" => "60000" })
      expect(admin.describe_configs(topic: topic)).to include("cleanup.policy" => "compact", "retention.ms" => "60000")

      admin.alter_configs(topic: topic, delete: ["cleanup.policy"])
      expect(admin.describe_configs(topic: topic)).to include("cleanup.policy" => "delete", "retention.ms" => "60000")
    end

    # The broker stores values normalized; alter_configs waited its whole
    # max_wait_timeout for them and raised AdminTimeoutError (issue 27).
    it "returns at once when the broker stores the values it was given normalized" do
      create
      expect_within(5, guards: "max_wait_timeout (10 s), waiting for the values as given") do
        admin.alter_configs(topic: topic, set: { "min.cleanable.dirty.ratio" => "0.50", "unclean.leader.election.enable" => "TRUE",
                                                 "retention.ms" => "0600000", "cleanup.policy" => "compact, delete" })
      end
      expect(admin.describe_configs(topic: topic)).to include("min.cleanable.dirty.ratio" => "0.5", "unclean.leader.election.enable" => "true",
                                                              "retention.ms" => "600000", "cleanup.policy" => "compact,delete")
    end

    it "describes a broker's settings" do
      broker = admin.cluster[:brokers].first[:id]
      expect(admin.describe_configs(broker: broker)).to include("num.partitions")
    end
  end

  describe "offsets" do
    it "reads watermarks and offsets by time" do
      create(partitions: 2)
      before = Time.now - 60
      produce(topic, 5)
      expect(admin.watermark_offsets(topic, 0)).to eq([0, 5])
      expect(admin.watermark_offsets(topic, 1)).to eq([0, 0])
      expect(admin.offsets_for_time(topic, before)).to eq(0 => 0, 1 => -1)
      expect(admin.offsets_for_time(topic, Time.now + 3600)).to eq(0 => -1, 1 => -1)
      expect { admin.watermark_offsets("#{topic}-missing", 0) }.to raise_error(Sluice::Errors::UnknownTopicError)
      # Asked again after the topic's metadata was refreshed (#watermark_offsets), and still refused.
      expect { admin.watermark_offsets(topic, 2) }.to raise_error(Sluice::Errors::UnknownTopicError, /unknown_partition/)
    end

    # librdkafka asks at its isolation.level, read_committed by default even
    # on an admin's handle: while a transaction was open, the high watermark
    # read was its last stable offset (and the exactly-once cluster spec's
    # wait for the output's markers, comparing the two, waited for nothing).
    it "reads the high watermark past an open transaction's messages, and the last stable offset when told read_committed" do
      create(partitions: 1)
      producer = build_producer(kafka: { "transactional.id": "sluice-spec-admin-#{suffix}" })
      committed_reader = build_admin(kafka: { "isolation.level": "read_committed" })
      producer.transaction do
        producer.produce_sync(topic: topic, partition: 0, payload: "open")
        expect(admin.watermark_offsets(topic, 0)).to eq([0, 1])
        expect(committed_reader.watermark_offsets(topic, 0)).to eq([0, 0])
      end
      # The commit returns once the coordinator has decided; the marker reaches
      # the partition after it. A read_committed reader sees "open" only once
      # the marker is there (and with one replica, the high watermark with it).
      expect(consume(topic, 0, 0, 1, isolation: "read_committed").map { |m| m[:payload] }).to eq(["open"])
      expect(admin.watermark_offsets(topic, 0)).to eq([0, 2]) # the message and the commit marker
      expect(committed_reader.watermark_offsets(topic, 0)).to eq([0, 2])
    end

    # librdkafka caches the topic with the partitions it saw and takes a
    # partition missing there as final (until metadata.max.age.ms, 15 min):
    # the rolling upgrade's lag poller failed for minutes after a restarting
    # broker answered with fewer. Here the topic grows behind the cache's back.
    it "reads a partition its cached view of the topic did not have yet" do
      create(partitions: 1)
      expect(admin.watermark_offsets(topic, 0)).to eq([0, 0]) # the topic cached with 1 partition
      build_admin.create_partitions(topic, 2) # another client: this one's cache is not told

      expect(admin.watermark_offsets(topic, 1)).to eq([0, 0])
    end
  end

  describe "consumer groups" do
    it "moves an empty group's offsets, reads them back with the lag, and deletes the group" do
      create(partitions: 2)
      produce(topic, 4)

      expect(admin.reset_offsets(group, topic, :earliest)).to eq(0 => 0, 1 => 0)
      expect(admin.groups).to include(group)
      expect(admin.committed_offsets(group)).to eq(topic => { 0 => 0, 1 => 0 })
      expect(admin.lag(group)).to eq(topic => { 0 => 4, 1 => 0 })

      admin.reset_offsets(group, topic, { 0 => 3 })
      expect(admin.lag(group)).to eq(topic => { 0 => 1, 1 => 0 })
      admin.reset_offsets(group, topic, :latest)
      expect(admin.lag(group)).to eq(topic => { 0 => 0, 1 => 0 })
      admin.reset_offsets(group, topic, Time.now - 3600)
      expect(admin.committed_offsets(group)).to eq(topic => { 0 => 0, 1 => 0 })
      expect(admin.describe_group(group)).to include(state: :empty, members: [])

      admin.delete_group(group)
      expect(admin.groups).not_to include(group)
      expect { admin.delete_group(group) }.to raise_error(Sluice::Errors::UnknownGroupError)
      expect { admin.describe_group(group) }.to raise_error(Sluice::Errors::UnknownGroupError)
    end

    it "describes a group with a member, and refuses to move its offsets until it is empty" do
      create(partitions: 2)
      consumer = group_consumer(group, kafka: { "client.id": "admin-spec" })
      assigned = Queue.new
      consumer.monitor.subscribe("consumer.partitions_assigned") { assigned << true }
      consumer.subscribe(topic)
      stop = false
      reader = Thread.new { consumer.poll(50) until stop }
      assigned.pop

      description = admin.describe_group(group)
      expect(description[:state]).to eq(:stable)
      expect(description[:members].size).to eq(1)
      expect(description[:members].first).to include(client_id: "admin-spec", assignment: { topic => [0, 1] }, group_instance_id: nil)
      group_type = Gem::Version.new(Sluice.librdkafka_version) >= Gem::Version.new("2.10") # librdkafka describes types since
      if GroupProtocol.consumer? # KIP-848: the broker assigns, and says where it is taking the member
        expect(description[:type]).to eq(:consumer)
        expect(description[:members].first).to include(target_assignment: { topic => [0, 1] })
      else
        expect(description).to include(type: group_type ? :classic : nil, protocol: "range")
        expect(description[:members].first).to include(target_assignment: nil)
      end
      expect { admin.reset_offsets(group, topic, :earliest) }.to raise_error(Sluice::Errors::GroupNotEmptyError) { |e|
        expect(e.kafka_error.code).to eq(:non_empty_group)
      }

      stop = true
      reader.join
      consumer.close
      expect(admin.reset_offsets(group, topic, :latest)).to eq(0 => 0, 1 => 0)
      admin.delete_group(group)
    end
  end

  it "describes the cluster" do
    cluster = admin.cluster
    expect(cluster[:cluster_id]).to be_a(String)
    expect(cluster[:brokers]).to include(a_hash_including(id: cluster[:controller_id], host: a_kind_of(String), port: a_kind_of(Integer)))
  end

  describe "on the shared engine" do
    it "adds no Ruby thread beside a producer and a consumer in :fd mode (one of its own in :thread mode)" do
      build_producer.produce_sync(topic: "sluice-spec-1p", payload: "warm-up")
      consumer = group_consumer(group)
      threads = Thread.list.size
      second = build_admin
      expect(second.topics).to include("sluice-spec-1p")
      expect(Thread.list.size - threads).to eq(TestKafka::MODE == :fd ? 0 : 1)
    ensure
      consumer&.close
    end

    it "reports each call as admin.request" do
      events = Queue.new
      admin.monitor.subscribe("admin.request") { |event| events << event.payload }
      admin.topics
      expect(events.pop).to include(action: :topics, admin_id: admin.id, time: a_kind_of(Float))
    end

    it "emits statistics and asks for OAUTHBEARER tokens like the other clients" do
      stats = Queue.new
      monitor = Sluice::Monitor.new(logger: Logger.new(nil))
      monitor.subscribe("statistics.emitted") { |event| stats << event.payload }
      box = Queue.new
      refreshed = Queue.new
      monitor.subscribe("oauthbearer.token_refresh") do
        client = box.pop.tap { |built| box << built }
        client.oauthbearer_set_token(token: unsigned_jwt("alice"), principal_name: "alice", lifetime_ms: (Time.now.to_f * 1000).to_i + 60_000)
        refreshed << true
      end
      # The listener may run before new returns: it gets the admin through box.
      box << build_admin(brokers: TestKafka::SASL_BROKERS, monitor: monitor,
                         kafka: { "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "OAUTHBEARER", "statistics.interval.ms": 100 })
      expect(pop_within(refreshed, 10, what: "oauthbearer.token_refresh")).to be(true)
      expect(box.pop.topics).to include("sluice-spec-1p") # the token let it in
      expect(pop_within(stats, 10, what: "statistics.emitted")).to include(admin_id: admins.last.id)
    end

    it "bounds every call by max_wait_timeout" do
      unreachable = build_admin(brokers: "127.0.0.1:1", max_wait_timeout: 300)
      expect_within(5, guards: "librdkafka's own waits (socket.timeout.ms, 60 s) instead of max_wait_timeout (0.3 s a call)") do
        expect { unreachable.create_topic(topic) }.to raise_error(Sluice::Errors::AdminTimeoutError)
        expect { unreachable.topics }.to raise_error(Sluice::Errors::AdminError)
      end
    end

    it "survives an interrupted wait: the late result is dropped and the client goes on" do
      admin.topics
      expect { Timeout.timeout(0.001) { admin.create_topic(topic) } }.to raise_error(Timeout::Error)
      created << topic
      expect(admin.groups).to be_a(Array)
    end

    it "wakes a call waiting for its result when another thread closes the admin" do
      unreachable = build_admin(brokers: "127.0.0.1:1", max_wait_timeout: 30_000)
      waiter = Thread.new { unreachable.create_topic(topic) }
      waiter.report_on_exception = false
      Thread.pass until waiter.status == "sleep" || !waiter.alive? # parked on its ConditionVariable
      unreachable.close
      expect { waiter.value }.to raise_error(Sluice::Errors::AdminClosedError)
    end

    it "closes from a signal handler (no Mutex may be locked there)" do
      closing = admin # built here: nothing but close runs in the handler
      closed = Queue.new
      previous = Signal.trap("USR2") do
        closing.close
        closed << closing.closed?
      end
      Process.kill("USR2", Process.pid)
      expect(pop_within(closed)).to be(true)
    ensure
      Signal.trap("USR2", previous || "DEFAULT")
    end

    it "refuses calls once closed" do
      admin.close
      expect { admin.topics }.to raise_error(Sluice::Errors::AdminClosedError)
      expect { admin.create_topic(topic) }.to raise_error(Sluice::Errors::AdminClosedError)
      expect(admin.close).to be_nil
    end
  end
end
