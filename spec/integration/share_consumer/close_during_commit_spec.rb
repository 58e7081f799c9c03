# frozen_string_literal: true

require "sluice/testing"

# A share consumer's handle takes one call at a time (librdkafka refuses
# concurrent use), so a #commit_sync holds it until its answer comes, up to
# its own timeout. A #close of another thread meanwhile still returns within
# its own bound (false), and the consumer closes once the commit is answered.
#
# The mock cluster (librdkafka 2.15.0's has share groups) delays its answers:
# no real broker makes a commit wait on demand.
absent = if !Sluice::Native::ShareConsumer.supported?
           "needs librdkafka 2.15.0's share consumer"
         elsif !Sluice::Testing::MockCluster.available?
           "librdkafka #{Sluice.librdkafka_version} was linked without its mock cluster"
         end
RSpec.describe "ShareConsumer#close while another thread's commit_sync waits (mock)", timeout: 60, skip: absent do
  include Sluice::Testing::MockKafka

  let(:topic) { "sluice-spec-share-close-commit" }

  before { mock_kafka.create_topic(topic) }

  # Records accepted and not yet committed: produced one at a time until the
  # member (joined by its polls, reading from the end) is handed some.
  def accepted_records(consumer)
    consumer.subscribe(topic)
    producer = build_producer(kafka: mock_kafka.kafka)
    records = []
    deadline = monotonic + 20
    while records.empty? && monotonic < deadline
      producer.produce_sync(topic: topic, partition: 0, payload: "r")
      records = consumer.poll(500)
    end
    records.each { |record| consumer.accept(record) }
  ensure
    producer&.close
  end

  def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # A consumer whose commit_sync, on a thread of its own, holds the handle
  # waiting for an answer the mock holds 4 s; events get its close events.
  def committing_consumer(events)
    consumer = Sluice::ShareConsumer.new do |config|
      config.kafka = mock_kafka.kafka("group.id": "share-close-commit")
      config.acknowledgement = :explicit
      config.logger = Logger.new(nil)
    end
    %w[share_consumer.closing share_consumer.closed error.occurred].each do |name|
      consumer.monitor.subscribe(name) { |event| events << [name, event.payload] }
    end
    expect(accepted_records(consumer)).not_to be_empty

    mock_kafka.broker_rtt(1, 4_000)
    committer = Thread.new { consumer.commit_sync(20_000) }
    # The commit holds the handle (the consumer's lock) while it waits for the answer.
    deadline = monotonic + 10
    until consumer.instance_variable_get(:@lock).locked?
      raise "the commit did not start within 10 s" if monotonic > deadline

      Thread.pass
    end
    [consumer, committer]
  end

  it "returns false within its timeout, and the consumer closes once the commit is answered" do
    events = Queue.new
    consumer, committer = committing_consumer(events)

    closed = consumer.close(500)

    expect(closed).to be(false)
    expect(committer).to be_alive, "close returned only after the commit was answered (4 s)"
    expect(committer.value).to contain_exactly(include(topic: topic, partition: 0)) # answered (what the mock says of it aside)
    seen = Array.new(2) { pop_within(events) }
    expect(seen.map(&:first)).to eq(%w[share_consumer.closing share_consumer.closed])
    expect(seen.last.last).to include(within_timeout: false)
    expect(consumer).to be_closed
    expect { consumer.poll(0) }.to raise_error(Sluice::Errors::ConsumerClosedError)
  ensure
    consumer&.close(5_000)
  end

  # No caller is left to raise to: librdkafka's close failing (injected here:
  # neither a broker nor the mock fails it on demand) is an event, not a
  # thread's death printed on stderr.
  it "reports a failure of the close it finishes after returning as an error.occurred event" do
    events = Queue.new
    consumer, committer = committing_consumer(events)
    failure = Sluice::KafkaError.new(Sluice::KafkaError.number_for(:transport))
    allow(consumer.instance_variable_get(:@native)).to receive(:close_wait).and_wrap_original do |close_wait, ms|
      close_wait.call(ms)
      raise failure
    end

    expect(consumer.close(500)).to be(false)
    committer.join

    seen = Array.new(2) { pop_within(events) }
    expect(seen.map(&:first)).to eq(%w[share_consumer.closing error.occurred])
    expect(seen.last.last).to include(type: "share_consumer.close", error: failure)
  end
end
