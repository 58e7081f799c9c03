# frozen_string_literal: true

# Dead letters read back and produced again (issue 56, item 4): `sluice dlq
# tail|replay` and Sluice::DeadLetterQueue, over dead letters that
# each_message(dead_letter:) wrote. Each example's replay group starts at the
# dead-letter topic's end, so it sees only the letters the example wrote.
RSpec.describe "Dead-letter topics read back and replayed", :kafka do
  include SluiceCommand

  let(:source) { "sluice-spec-dlq-source" }
  let(:dlq) { "sluice-spec-dlq" }
  let(:group) { "sluice-spec-dlq-replay-#{rand(1 << 30)}" }
  let(:producer) { build_producer }
  let(:kafka) { { "bootstrap.servers": TestKafka::BROKERS } }
  let(:queue) { Sluice::DeadLetterQueue.new(dlq, kafka: kafka) }

  def ends(topic)
    consumer = build_consumer
    (0...3).to_h { |partition| [partition, consumer.query_watermark_offsets(topic, partition).last] }
  end

  # count messages of topic from those offsets, any partition (at most 20 s).
  def read_from(topic, offsets, count)
    consumer = build_consumer
    consumer.assign(topic => offsets)
    poll_messages(consumer, count)
  end

  # A replay group that starts at the dead-letter topic's current end.
  def start_at_end(group)
    consumer = build_consumer(group_id: group)
    consumer.assign(dlq => [0, 1, 2])
    consumer.commit(dlq => ends(dlq))
  end

  # Three messages of the source's partition 2, each failing with its own error class: their dead letters.
  # @return [Integer] the first one's offset
  def dead_letter_three
    first = producer.produce_sync(topic: source, partition: 2, key: "k1", payload: "p1", headers: { "trace" => "t1" }).offset
    producer.produce_sync(topic: source, partition: 2, key: "k2", payload: "p2")
    producer.produce_sync(topic: source, partition: 2, key: "k3", payload: "p3")
    consumer = build_consumer("auto.offset.reset": "earliest")
    consumer.assign(source => { 2 => first })
    errors = { "k1" => KeyError, "k2" => ArgumentError, "k3" => KeyError }
    failing = lambda do |message|
      consumer.stop if message.key == "k3"
      raise errors.fetch(message.key), "bad #{message.key}"
    end
    consumer.each_message(dead_letter: dlq, &failing)
    first
  end

  it "replays each dead letter to its source partition once, and resumes where it stopped" do
    start_at_end(group)
    first = dead_letter_three
    source_end = ends(source)[2]
    expect(queue.replay(group: group)).to eq(3)
    replayed = consume(source, 2, source_end, 3)
    expect(replayed.map { |m| [m[:key], m[:payload]] }).to eq([%w[k1 p1], %w[k2 p2], %w[k3 p3]])
    expect(replayed.first[:headers].to_h).to eq("trace" => "t1") # the origin headers left out
    expect(queue.replay(group: group)).to eq(0)
    expect(first).to be < source_end
  end

  it "replays only the letters asked for, to another topic" do
    start_at_end(group)
    dead_letter_three
    target_ends = ends(source)
    expect(queue.replay(to_topic: source, where: { "error_class" => "KeyError" }, group: group)).to eq(2)
    expect(read_from(source, target_ends, 2).map(&:key)).to contain_exactly("k1", "k3") # by key: any partition
  end

  it "sluice dlq tail shows each letter's origin and error; replay takes --to and --where" do
    start_at_end(group)
    first = dead_letter_three
    tail = sluice("dlq", "tail", dlq)
    expect(tail.code).to eq(0)
    expect(tail.stdout).to include("from #{source}/2@#{first + 1} group ").and include("1 attempt(s), key \"k2\": ArgumentError: bad k2")
    replay = sluice("dlq", "replay", dlq, "--to", source, "--where", "error_class=KeyError", "--where", "key=k3", "-G", group)
    expect([replay.code, replay.stderr]).to eq([0, "1 dead letter(s) produced to #{source}\n"])
    expect(sluice("dlq", "rewind", dlq).code).to eq(2)
  end
end
