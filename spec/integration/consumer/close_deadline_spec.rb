# frozen_string_literal: true

# A consumer's close from another thread keeps its timeout while a block of
# a concurrent each_message is stuck (issue 53, item 1): the read waits for
# running blocks only until half the close's timeout is spent, kills them,
# and the close commits what finished and leaves the group in the rest.
# Before, close returned nil after its timeout with the consumer still open
# and in its group, and the real close came once finish_within (30 s) ran out.
RSpec.describe "Consumer close from another thread while a concurrent block is stuck", :kafka do
  include ParallelReads

  close_timeout = 2_000 # ms
  margin = 0.6 # s: librdkafka's teardown (DESTROY_GRACE, 0.4 s) and scheduling

  it "closes within its timeout: closed, the group left, the finished block committed" do
    first = produce(%w[done stuck])
    consumer = build_consumer
    consumer.subscribe(topic)
    started = Queue.new
    stuck = Queue.new # never fed: that block runs until it is killed
    reader = Thread.new do
      consumer.each_message(concurrency: 2, ordering: :none) do |message|
        next unless message.partition.zero? && message.offset >= first # the topic's other messages finish at once

        started << message.offset
        stuck.pop if message.offset == first + 1
      end
    end
    2.times { pop_within(started, 30) }
    expect_within(close_timeout / 1000.0 + margin, guards: "close waiting for a stuck block past its timeout") do
      expect(consumer.close(timeout: close_timeout)).to be_nil
    end
    expect(consumer).to be_closed
    reader.join(5) or raise "each_message did not return"
    admin = Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": TestKafka::BROKERS } }
    expect(admin.describe_group(group)[:members]).to eq([])
    expect(admin.committed_offsets(group).dig(topic, 0)).to eq(first + 1) # "done" finished; "stuck" is read again
  ensure
    admin&.close
  end

  # The reader runs a one-at-a-time block itself: nothing can end it, so the
  # close says so rather than return nil with the consumer open.
  it "raises ConsumerCloseTimeoutError when the reader's own block outlives it, and closes when the block returns" do
    first = produce(%w[stuck])
    consumer = reader(0 => first)
    started = Queue.new
    stuck = Queue.new
    thread = Thread.new { consumer.each_message { |_| (started << true) && stuck.pop } }
    pop_within(started, 30)
    expect_within(1.0 + margin, guards: "close waiting for the reader past its timeout") do
      expect { consumer.close(timeout: 1_000) }.to raise_error(Sluice::Errors::ConsumerCloseTimeoutError)
    end
    expect(consumer).not_to be_closed
    stuck << true
    thread.join(10) or raise "each_message did not return"
    expect(consumer).to be_closed
    expect(committed_offset).to eq(first + 1)
  end
end
