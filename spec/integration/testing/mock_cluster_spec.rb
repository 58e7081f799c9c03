# frozen_string_literal: true

require "logger"
require "rspec/core/sandbox"
require "socket"
require "sluice/testing"

# Sluice::Testing::MockCluster: librdkafka's mock brokers in this process, for
# users' specs. Real clients against it: no JVM, no broker of bin/kafka's.
absent = !Sluice::Testing::MockCluster.available? && "librdkafka #{Sluice.librdkafka_version} was linked without its mock cluster"
# Where the mock has the setting, MockKafka's groups join at once (2.0.2's wait 3 s: the mock's default).
join_delay = !absent && Sluice::Native::MockCluster.method_defined?(:group_initial_rebalance_delay_ms)
RSpec.describe Sluice::Testing::MockCluster, timeout: 30, skip: absent do
  include Sluice::Testing::MockKafka

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  def producer(**kafka)
    Sluice::Producer.new do |config|
      config.kafka = mock_kafka.kafka("retry.backoff.ms": 10, **kafka)
      config.polling.mode = TestKafka::MODE
      config.logger = Logger.new(nil)
    end
  end

  def consumer(**kafka)
    Sluice::Consumer.new do |config|
      config.kafka = mock_kafka.kafka("group.id": "mock-group", "auto.offset.reset": "earliest", **kafka)
      config.polling.mode = TestKafka::MODE
      config.logger = Logger.new(nil)
    end
  end

  # @return [Array<Sluice::Message>] count messages, or fewer when seconds ran out
  def read(consumer, count, seconds: 10) = poll_messages(consumer, count, seconds: seconds, poll_ms: 100)

  before { mock_kafka.create_topic("orders", partitions: 2) }

  it "carries a message from a producer to a consumer" do
    writer = producer
    report = writer.produce_sync(topic: "orders", partition: 1, key: "k", payload: "42")
    reader = consumer
    reader.assign("orders" => [1])
    message = read(reader, 1).first
    expect([report.offset, message&.key, message&.payload]).to eq([0, "k", "42"])
  ensure
    writer&.close
    reader&.close
  end

  it "keeps the offset a consumer group committed" do
    writer = producer
    writer.produce_many_sync([{ topic: "orders", partition: 0, payload: "a" }, { topic: "orders", partition: 0, payload: "b" }])
    member = consumer
    member.subscribe("orders")
    first = read(member, 1).first
    member.commit("orders" => { 0 => first.offset + 1 })
    member.close
    successor = consumer
    successor.assign("orders" => [0]) # from the group's committed offset
    expect([first.payload, read(successor, 1).first&.payload]).to eq(%w[a b])
  ensure
    writer&.close
    member&.close
    successor&.close
  end

  it "answers an admin's metadata and watermarks" do
    producer.tap { |writer| writer.produce_sync(topic: "orders", partition: 1, payload: "a") }.close
    admin = Sluice::Admin.new do |config|
      config.kafka = mock_kafka.kafka
      config.logger = Logger.new(nil)
    end
    expect([admin.describe_topic("orders")[:partitions].size, admin.watermark_offsets("orders", 1)]).to eq([2, [0, 1]])
  ensure
    admin&.close
  end

  it "lets MockKafka's group join at once: its initial rebalance delay is 0 unless set" do
    skip "librdkafka #{Sluice.librdkafka_version}'s mock has no group.initial.rebalance.delay.ms" unless join_delay

    producer.tap { |writer| writer.produce_sync(topic: "orders", partition: 0, payload: "a") }.close
    member = consumer
    started = now
    member.subscribe("orders")
    expect(read(member, 1, seconds: 2).first&.payload).to eq("a"), "not read within 2 s: the join waited the default 3 s delay"
    puts format("mock cluster: a group joined and read in %<seconds>.2fs with no initial rebalance delay", seconds: now - started)
  ensure
    member&.close
  end

  it "commits a transaction" do
    writer = producer("transactional.id": "mock-txn")
    writer.transaction { writer.produce_async(topic: "orders", partition: 0, payload: "in a transaction") }
    reader = consumer("isolation.level": "read_committed")
    reader.assign("orders" => [0])
    expect(read(reader, 1).first&.payload).to eq("in a transaction")
  ensure
    writer&.close
    reader&.close
  end

  describe "#inject_errors" do
    it "makes a produce retry: fewer retries than errors fail with the error, the default retries deliver" do
      mock_kafka.inject_errors(:produce, :not_enough_replicas, count: 3)
      impatient = producer(retries: 2)
      expect { impatient.produce_sync(topic: "orders", partition: 0, payload: "x") }
        .to raise_error(Sluice::Errors::ProduceError) { |error| expect(error.code).to eq(:not_enough_replicas) }
      mock_kafka.inject_errors(:produce, :not_enough_replicas, count: 3)
      patient = producer
      expect(patient.produce_sync(topic: "orders", partition: 0, payload: "y").offset).to be >= 0
    ensure
      impatient&.close
      patient&.close
    end

    it "fails a delivery with a non-retriable error, and the next one goes through" do
      mock_kafka.inject_errors(:produce, :msg_size_too_large)
      writer = producer
      expect { writer.produce_sync(topic: "orders", partition: 0, payload: "x") }
        .to raise_error(Sluice::Errors::ProduceError) { |error| expect(error.code).to eq(:msg_size_too_large) }
      expect(writer.produce_sync(topic: "orders", partition: 0, payload: "y").offset).to be >= 0
    ensure
      writer&.close
    end

    it "names what it does not know" do
      expect { mock_kafka.inject_errors(:create_topics, :not_coordinator) }.to raise_error(ArgumentError, /answers no :create_topics request/)
      expect { mock_kafka.inject_errors(:produce, :no_such_error) }.to raise_error(ArgumentError, /unknown librdkafka error code/)
      expect { mock_kafka.inject_errors(:produce, :msg_timed_out) }.to raise_error(ArgumentError, /client-side error/)
      expect { mock_kafka.inject_errors(:produce, :not_coordinator, count: 0) }.to raise_error(ArgumentError, /count/)
    end
  end

  it "takes a broker down and up again: a message waits while it is down, and is delivered once it is up" do
    writer = producer
    mock_kafka.broker_down(1)
    handle = writer.produce_async(topic: "orders", partition: 0, payload: "x")
    expect { handle.wait(max_wait_timeout: 500) }.to raise_error(Sluice::Errors::WaitTimeoutError)
    mock_kafka.broker_up(1)
    expect(handle.wait(max_wait_timeout: 10_000).offset).to eq(0)
    expect { mock_kafka.broker_down(2) }.to raise_error(ArgumentError, /no broker 2/)
  ensure
    writer&.close
  end

  it "delays a broker's answers: a delivery's report comes only after the delay" do
    writer = producer
    writer.produce_sync(topic: "orders", partition: 0, payload: "connected") # no connection to wait for below
    mock_kafka.broker_rtt(1, 3_000)
    handle = writer.produce_async(topic: "orders", partition: 0, payload: "x")
    expect { handle.wait(max_wait_timeout: 500) }.to raise_error(Sluice::Errors::WaitTimeoutError)
    mock_kafka.broker_rtt(1, 0)
    expect(handle.wait(max_wait_timeout: 10_000).offset).to eq(1)
    expect { mock_kafka.broker_rtt(1, -1) }.to raise_error(ArgumentError, /Integer >= 0/)
    expect { mock_kafka.broker_rtt(2, 10) }.to raise_error(ArgumentError, /no broker 2/)
  ensure
    writer&.close
  end

  it "closes once: its ports are released, a second close does nothing, calls after it raise" do
    cluster = described_class.new
    port = Integer(cluster.bootstrap_servers.split(",").first.split(":").last)
    cluster.close
    expect { TCPSocket.new("127.0.0.1", port).close }.to raise_error(Errno::ECONNREFUSED)
    expect(cluster.close).to be_nil
    expect(cluster).to be_closed
    expect { cluster.create_topic("late") }.to raise_error(described_class::ClosedError)
    expect { cluster.inject_errors(:produce, :not_coordinator) }.to raise_error(described_class::ClosedError)
  end

  it "closes the cluster of a block when the block ends, even by an exception" do
    kept = nil
    expect { described_class.start { |cluster| (kept = cluster) && raise("boom") } }.to raise_error("boom")
    expect(kept).to be_closed
  end

  it "gives MockKafka's example one cluster, closed after the example" do
    seen = []
    group = RSpec::Core::Sandbox.sandboxed do
      RSpec.describe("a user's spec") do
        include Sluice::Testing::MockKafka
        it("uses mock_kafka twice") { seen << mock_kafka << mock_kafka }
      end
    end
    expect(group.run).to be(true)
    expect(seen.uniq.size).to eq(1)
    expect(seen.first).to be_closed
  end
end

RSpec.describe "Sluice::Testing::MockCluster without librdkafka's mock" do
  it "says why it cannot start" do
    allow(Sluice::Testing::MockCluster).to receive(:available?).and_return(false)
    expect { Sluice::Testing::MockCluster.new }.to raise_error(Sluice::Testing::MockCluster::UnavailableError, /without its mock cluster/)
  end
end
