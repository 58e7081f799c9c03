# frozen_string_literal: true

# each_message(retry_topics: [1, 2], dead_letter:) against the real broker, in
# the polling mode of the run: a failed message goes to the next retry topic
# (acknowledged before its offset is stored), is run again there once due
# (its partition paused meanwhile, the source partition going on), and goes to
# the dead-letter topic after the last, its origin kept. Synchronised on
# queues and events; the delays are the feature's own (1 s, 2 s).
RSpec.describe "Consumer retry topics (retry_topics:)", :kafka do
  let(:topic) { "sluice-spec-retrying" }
  let(:retry_topics) { %w[sluice-spec-retrying.retry.1s sluice-spec-retrying.retry.2s] }
  let(:dlq) { "sluice-spec-retrying-dlq" }
  let(:group) { "sluice-spec-retrying-#{rand(1 << 30)}" }
  let(:producer) { build_producer }
  let(:injected) { Class.new(StandardError) }
  let(:policy) { { retry_topics: [1, 2], dead_letter: dlq } }

  def build_consumer(**kafka) = super(group_id: group, "auto.offset.reset": "earliest", **kafka)

  def end_of(name, partition = 0) = build_consumer.query_watermark_offsets(name, partition).last

  def produce(payload, key: nil, headers: nil)
    producer.produce_async(topic: topic, partition: 0, key: key, payload: payload, headers: headers).wait.offset
  end

  # Partition 0 of the source from first, and of each retry topic from its
  # end (a failed message keeps its partition number there): by assignment,
  # which names the retry topics itself (no subscription to add them to).
  def retry_reader(first, **kafka)
    offsets = { topic => { 0 => first } }
    retry_topics.each { |name| offsets[name] = { 0 => end_of(name) } }
    consumer = build_consumer(**kafka)
    consumer.commit(offsets)
    consumer.assign(offsets)
    consumer
  end

  def monitor(consumer) = consumer.instance_variable_get(:@monitor)

  def run_read(consumer, **options, &block)
    Thread.new { consumer.each_message(**options, &block) }.tap { |thread| thread.report_on_exception = false }
  end

  def drain(queue) = Array.new(queue.size) { queue.pop }

  [1, 4].each do |concurrency|
    it "runs a message that failed once again from its retry topic, once its delay passed (concurrency #{concurrency})" do
      first = produce("once", key: "k", headers: { "trace" => "t1" })
      consumer = retry_reader(first)
      scheduled = record_events(monitor(consumer), "consumer.retry_scheduled")
      runs = Queue.new
      thread = run_read(consumer, concurrency: concurrency, **policy) do |message|
        runs << [message, monotonic]
        raise injected, "fails once" if message.topic == topic

        consumer.stop
      end
      failed, failed_at = pop_within(runs, 20)
      retried, retried_at = pop_within(runs, 20)
      expect(thread.join(20)&.value).to be_nil
      expect(failed.offset).to eq(first)
      expect([retried.topic, retried.partition, retried.key, retried.payload]).to eq([retry_topics[0], 0, "k", "once"])
      expect(retried.timestamp).to eq(failed.timestamp)
      expect(retried.headers).to include("trace" => "t1", "source_topic" => topic, "source_partition" => "0", "source_offset" => first.to_s,
                                         "source_consumer_group" => group, "source_attempts" => "1", "error_class" => "StandardError",
                                         "error_message" => "fails once", "retry_due" => match(/\A\d+\z/))
      expect_elapsed(retried_at - failed_at, at_least: 1.0, within: 15, guards: "the first retry topic's delay (1 s)")
      expect(scheduled.await { |event| event[:offset] == first }.payload)
        .to include(topic: topic, partition: 0, retry_topic: retry_topics[0], delay: 1, attempts: 1, error: an_instance_of(injected))
      consumer.commit
      expect(consumer.committed[topic][0]).to eq(first + 1)
    end
  end

  it "waits for a retry topic's message under the caller's fiber scheduler without blocking its thread", :async do
    first = produce("fiber")
    consumer = retry_reader(first)
    runs = []
    ticks = 0
    Async do |task|
      ticker = task.async { loop { (ticks += 1) && sleep(0.05) } } # runs only while the reader's waits yield
      consumer.each_message(concurrency: 2, **policy) do |message|
        runs << [message.topic, monotonic, Fiber.current.blocking?]
        raise injected, "fails once" if message.topic == topic

        consumer.stop
      end
      ticker.stop
    end.wait
    expect(runs.map(&:first)).to eq([topic, retry_topics[0]])
    expect(runs.map(&:last).uniq).to eq([false])
    expect_elapsed(runs[1][1] - runs[0][1], at_least: 1.0, guards: "the first retry topic's delay (1 s)")
    expect(ticks).to be > 10 # the second's wait yielded to the scheduler
  end

  it "sends a message that always fails to the dead-letter topic after the last retry topic, with its origin" do
    first = produce("poison", key: "p", headers: { "trace" => "t2" })
    dead_from = end_of(dlq)
    consumer = retry_reader(first)
    dead = record_events(monitor(consumer), "consumer.dead_lettered")
    runs = Queue.new
    started = monotonic
    thread = run_read(consumer, **policy) do |message|
      runs << message.topic
      raise injected, "always"
    end
    event = dead.await(30) { |e| e[:topic] == retry_topics[1] }
    dead_at = monotonic
    consumer.stop
    expect(thread.join(20)&.value).to be_nil
    expect(drain(runs)).to eq([topic, *retry_topics])
    expect(event.payload).to include(attempts: 3, dead_letter_topic: dlq)
    expect_elapsed(dead_at - started, at_least: 3.0, guards: "the retry topics' delays (1 s, then 2 s)")
    letter = consume(dlq, 0, dead_from, 1).first
    expect(letter).to include(key: "p", payload: "poison")
    headers = letter[:headers].to_h
    expect(headers).to include("trace" => "t2", "source_topic" => topic, "source_partition" => "0", "source_offset" => first.to_s,
                               "source_consumer_group" => group, "source_attempts" => "3", "error_message" => "always")
    expect(headers).not_to have_key("retry_due")
  end

  [1, 4].each do |concurrency|
    it "goes on with the source partition while a retry waits, the retry partition paused, not read again and again " \
       "(concurrency #{concurrency})" do
      first = produce("bad", key: "a")
      produce("good1", key: "b")
      produce("good2", key: "c")
      consumer = retry_reader(first)
      waiting = record_events(monitor(consumer), "consumer.retry_waiting")
      log = Queue.new
      thread = run_read(consumer, concurrency: concurrency, **policy) do |message|
        log << [message.topic, message.payload]
        raise injected, "bad" if message.topic == topic && message.payload == "bad"

        consumer.stop if message.topic == retry_topics[0]
      end
      expect(thread.join(20)&.value).to be_nil
      seen = drain(log)
      expect(seen.first(3)).to contain_exactly([topic, "bad"], [topic, "good1"], [topic, "good2"])
      expect(seen.last).to eq([retry_topics[0], "bad"])
      expect(seen.size).to eq(4)
      # Fetched before it was due, then paused: taken back once. A partition
      # only sought back would be fetched again at once, and taken back again.
      held = waiting.events.select { |event| event[:topic] == retry_topics[0] }
      expect(held.size).to eq(1)
      expect(held.first[:wait]).to be > 0.5
    end
  end

  it "stores no offset before the retry topic acknowledged the message: a crash in between reads it again" do
    first = produce("crash")
    retry_from = end_of(retry_topics[0])
    consumer = retry_reader(first)
    crash = Class.new(Exception) # rubocop:disable Lint/InheritException -- a crash: no StandardError a policy would handle
    monitor(consumer).subscribe("consumer.retry_scheduled") { raise crash, "killed after the retry's acknowledgement" }
    failing = ->(_message) { raise injected, "fails" }
    expect { consumer.each_message(**policy, &failing) }.to raise_error(crash)
    consumer.close
    copy = consume(retry_topics[0], 0, retry_from, 1).first
    expect(copy).to include(payload: "crash")
    expect(copy[:headers].to_h).to include("source_offset" => first.to_s)
    again = build_consumer
    again.assign(topic => [0])
    expect(again.committed[topic][0]).to eq(first)
    seen = nil
    again.each_message do |message|
      seen = message
      again.stop
    end
    expect([seen.topic, seen.offset]).to eq([topic, first])
  end

  it "subscribes to the retry topics of the topics the consumer subscribed to by name" do
    consumer = build_consumer("auto.offset.reset": "latest")
    consumer.subscribe(topic)
    assigned = record_events(monitor(consumer), "consumer.partitions_assigned")
    thread = run_read(consumer, **policy) { nil }
    assigned.await(30) { |event| event[:partitions].key?(retry_topics[1]) || event[:partitions].key?(retry_topics[1].to_sym) }
    expect(consumer.assignment.keys).to contain_exactly(topic, *retry_topics)
    consumer.stop
    expect(thread.join(20)&.value).to be_nil
  end

  it "refuses retry_topics without a dead-letter topic, or delays not ascending" do
    consumer = build_consumer
    expect { consumer.each_message(retry_topics: [1, 2]) { nil } }.to raise_error(ArgumentError, /needs dead_letter/)
    expect { consumer.each_message(retry_topics: [2, 1], dead_letter: dlq) { nil } }.to raise_error(ArgumentError, /ascending/)
    expect { consumer.each_message(retry_topics: [0], dead_letter: dlq) { nil } }.to raise_error(ArgumentError, /> 0/)
  end
end
