# frozen_string_literal: true

# each_message(concurrency:) keeps what finished above a partition's lowest
# unfinished message in the committed offset's metadata
# (Consumer::FinishedOffsets): a member that reads the partition next, after
# this one was closed with a block still running, skips those messages
# instead of running their blocks again. (A SIGKILLed member leaves the same
# metadata, committed every 0.1 s: bench figures in the branch's CHANGELOG line.)
RSpec.describe "Consumer#each_message with concurrency: what finished above a held message", :kafka,
               skip: (Gem::Version.new(Sluice.librdkafka_version) < Gem::Version.new("2.2") &&
                      "librdkafka #{Sluice.librdkafka_version} drops an offset's metadata on rd_kafka_offsets_store") do
  include ParallelReads

  # Payloads of this example's own (other examples may write to the topic meanwhile).
  let(:tag) { "finished-#{rand(1 << 30)}" }

  it "is not handed out again to the next member" do
    first = produce(Array.new(20) { |i| "#{tag}-m#{i}" })
    held = "#{tag}-m2"
    consumer = reader(0 => first)
    finished = Queue.new
    release = Queue.new
    reading = Thread.new do
      consumer.each_message(concurrency: 4, ordering: :none, finish_within: 100) do |message|
        next release.pop if message.payload == held

        finished << message.payload if message.payload.start_with?(tag)
      end
    end
    others = Array.new(19) { pop_within(finished) }
    expect(others).not_to include(held)
    consumer.stop # the held block outlives finish_within: its offset is not stored
    reading.join(30) or raise "each_message did not return"
    consumer.close
    release << true

    sentinel = "#{tag}-last"
    produce([sentinel])
    seen = []
    next_member = build_consumer
    next_member.assign(topic => [0])
    next_member.each_message(concurrency: 4, ordering: :none) do |message|
      seen << message.payload if message.payload.start_with?(tag) # blocks start in offset order: all before the sentinel have
      next_member.stop if message.payload == sentinel
    end
    next_member.close
    expect(seen).to contain_exactly(held, sentinel)
  end
end
