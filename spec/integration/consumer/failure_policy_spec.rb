# frozen_string_literal: true

# each_message / each_batch with retries: and dead_letter: (Consumer::Failure)
# against the real broker, in the polling mode of the run: a retry runs in the
# key's lane while other keys go on, no offset passes a message being retried,
# a stop cuts a backoff short, and a dead letter keeps everything of its
# message and is acknowledged (or committed in the same transaction) before
# the message's offset is stored. Synchronised on queues and events, never on time.
RSpec.describe "Consumer failure policies (retries:, dead_letter:)", :kafka do
  include ParallelReads

  let(:topic) { "sluice-spec-failures" }
  let(:dlq) { "sluice-spec-failures-dlq" }
  let(:group) { "sluice-spec-failures-#{rand(1 << 30)}" }
  let(:producer) { build_producer }
  let(:injected) { Class.new(StandardError) }
  let(:poison) { ->(_message) { raise injected, "poison" } }
  let(:quick) { { attempts: 3, backoff: 0.01..0.01 } }

  # The DLQ's end offsets now: where this example's dead letters will be.
  def dlq_ends
    consumer = build_consumer
    (0...3).to_h { |partition| [partition, consumer.query_watermark_offsets(dlq, partition).last] }
  end

  # count messages of the DLQ's partition from offset (at most 20 s).
  def dead_letters(partition, offset, count, isolation: "read_uncommitted")
    consumer = build_consumer("isolation.level": isolation, "enable.auto.commit": false)
    consumer.assign(dlq => { partition => offset })
    poll_messages(consumer, count)
  end

  def run_read(consumer, **options, &block)
    Thread.new { consumer.each_message(**options, &block) }.tap { |thread| thread.report_on_exception = false }
  end

  it "runs a failed block again in its key's lane while other keys go on, each key in order" do
    first = produce(%w[a1 a2 b1 c1 b2], keys: %w[a a b c b])
    consumer = reader(0 => first)
    events = record_events(consumer.instance_variable_get(:@monitor), "consumer.retry")
    others_done = Queue.new
    log = Queue.new
    attempts = Hash.new(0)
    others = 0
    lock = Mutex.new
    thread = run_read(consumer, concurrency: 4, retries: quick) do |message|
      tries = lock.synchronize { attempts[message.payload] += 1 }
      raise injected, "a1 fails once" if message.payload == "a1" && tries == 1

      pop_within(others_done, 20) if message.payload == "a1" # its retry goes on once the other keys finished
      log << message.payload
      others_done << true if message.key != "a" && lock.synchronize { (others += 1) == 3 }
      consumer.stop if log.size == 5
    end
    expect(thread.join(30)).to be_truthy
    seen = Array.new(log.size) { log.pop }
    expect(seen.first(3)).to contain_exactly("b1", "c1", "b2")
    expect(seen.last(2)).to eq(%w[a1 a2])
    expect(attempts["a1"]).to eq(2)
    retry_event = events.await { |event| event[:offset] == first }
    expect(retry_event.payload).to include(topic: topic, partition: 0, attempt: 1, error: an_instance_of(injected))
    consumer.commit
    expect(committed_offset).to eq(first + 5)
  end

  it "stores no offset past a message being retried" do
    first = produce(%w[a1 b1 c1], keys: %w[a b c])
    consumer = reader(0 => first)
    others_done = Queue.new
    retried = Queue.new
    runs = 0
    lock = Mutex.new
    thread = run_read(consumer, concurrency: 4, retries: quick, finish_within: 200) do |message|
      if message.key == "a"
        raise injected, "a1 fails once" if lock.synchronize { runs += 1 } == 1

        retried << true
        Queue.new.pop # the retry never finishes: the read leaves it behind
      end
      others_done << true
    end
    2.times { pop_within(others_done, 20) }
    pop_within(retried, 20)
    consumer.stop
    expect(thread.join(30)).to be_truthy
    consumer.commit
    expect(committed_offset).to eq(first) # b1 and c1 finished above a1: nothing passes it
  end

  it "counts what the read holds, running, waiting and retrying, in #in_flight and in each statistics emission" do
    first = produce(%w[a1 a2 b1 c1], keys: %w[a a b c])
    consumer = build_consumer("statistics.interval.ms": 100)
    consumer.commit(topic => { 0 => first })
    consumer.assign(topic => { 0 => first })
    emitted = record_events(consumer.monitor, "statistics.emitted")
    gate = Queue.new
    runs = Hash.new(0)
    lock = Mutex.new
    thread = run_read(consumer, concurrency: 4, retries: { attempts: 2, backoff: 0.01..0.01 }) do |message|
      raise injected, "b1 fails once" if message.payload == "b1" && lock.synchronize { runs["b1"] += 1 } == 1

      gate.pop unless message.payload == "a2" # a1 and c1 run, a2 waits in a's lane, b1's retry runs
    end
    held = { running: 2, waiting: 1, retrying: 1 }
    expect(emitted.await(20) { |event| event[:in_flight] == held }.payload).to include(consumer_id: consumer.id)
    expect(consumer.in_flight).to eq(held)
    3.times { gate << true }
    emitted.await(20) { |event| event[:in_flight] == { running: 0, waiting: 0, retrying: 0 } }
    consumer.stop
    expect(thread.join(30)).to be_truthy
    expect(consumer.in_flight).to eq(running: 0, waiting: 0, retrying: 0)
  end

  it "ends a backoff when the read is stopped, storing nothing of the message" do
    first = produce(%w[a1])
    consumer = reader(0 => first)
    events = record_events(consumer.instance_variable_get(:@monitor), "consumer.retry")
    thread = run_read(consumer, retries: { attempts: 2, backoff: 30.0..30.0 }) { raise injected, "always" }
    events.await { |event| event[:offset] == first }
    consumer.stop
    expect_within(5, guards: "the 30 s backoff") { expect(thread.value).to be_nil }
    consumer.commit
    expect(committed_offset).to eq(first)
    expect(reread(1)).to eq([first]) # handed out again
  end

  it "retries on fibers of the caller's scheduler, the backoff suspending only its fiber", :async do
    first = produce(%w[a1 b1], keys: %w[a b])
    consumer = reader(0 => first)
    places = Queue.new
    seen = []
    runs = 0
    Async do
      consumer.each_message(concurrency: 2, retries: { attempts: 2, backoff: 0.05..0.05 }) do |message|
        places << [Thread.current, Fiber.current.blocking?]
        raise injected, "a1 fails once" if message.key == "a" && (runs += 1) == 1

        seen << message.payload
        consumer.stop if seen.size == 2
      end
    end.wait
    expect(seen).to contain_exactly("a1", "b1")
    expect(Array.new(places.size) { places.pop }.uniq).to eq([[Thread.current, false]])
    consumer.commit
    expect(committed_offset).to eq(first + 2)
  end

  describe "dead letters" do
    # A node's failover takes longer than a producer's default 5 s wait: that wait ended the read.
    it "are waited for, with the consumer's own producer, as long as librdkafka tries to deliver them" do
      producer = build_consumer.send(:dead_letter_producer)
      expect(producer.config.max_wait_timeout).to eq(305_000) # message.timeout.ms' default, and the report's way back
    ensure
      producer&.close
    end

    it "produce the poison message with its key, payload, headers and timestamp, then store its offset" do
      stamp = Time.at(1_700_000_000, 123, :millisecond)
      ends = dlq_ends
      poison = producer.produce_sync(topic: topic, partition: 1, key: "order-7", payload: "poison", headers: { "trace" => "t-1" },
                                     timestamp: stamp).offset
      producer.produce_sync(topic: topic, partition: 1, payload: "fine")
      consumer = reader(1 => poison)
      events = record_events(consumer.instance_variable_get(:@monitor), "consumer.dead_lettered")
      runs = 0
      consumer.each_message(retries: { attempts: 2, backoff: 0.01..0.01 }, dead_letter: dlq) do |message|
        runs += 1
        raise injected, "cannot bill order-7" if message.payload == "poison"

        consumer.stop
      end
      expect(runs).to eq(3)
      consumer.commit
      expect(committed_offset(1)).to eq(poison + 2)
      letter = dead_letters(1, ends[1], 1).first # same partition number: the DLQ has as many
      expect(letter).to have_attributes(key: "order-7", payload: "poison", timestamp_ms: 1_700_000_000_123)
      expect(letter.headers).to include("trace" => "t-1", "source_topic" => topic, "source_partition" => "1",
                                        "source_offset" => poison.to_s, "source_consumer_group" => group,
                                        "source_attempts" => "2", "error_class" => "StandardError",
                                        "error_message" => "cannot bill order-7")
      expect(events.await.payload).to include(topic: topic, partition: 1, offset: poison, attempts: 2, dead_letter_topic: dlq)
    end

    it "under concurrency, dead-letter a message while the others go on" do
      first = produce(%w[a1 b1 b2], keys: %w[a b b])
      ends = dlq_ends
      consumer = reader(0 => first)
      done = Queue.new
      thread = run_read(consumer, concurrency: 4, dead_letter: { topic: dlq, producer: producer }) do |message|
        raise injected, "a1 is poison" if message.key == "a"

        done << message.offset
        consumer.stop if done.size == 2
      end
      expect(thread.join(30)).to be_truthy
      consumer.commit
      expect(committed_offset).to eq(first + 3)
      expect(dead_letters(0, ends[0], 1).first).to have_attributes(key: "a", payload: "a1")
    end

    it "leave the offset unstored when the dead letter is refused" do
      first = produce(["x" * 3_000]) # sluice-spec-small takes 2,000 bytes a message
      consumer = reader(0 => first)
      expect do
        consumer.each_message(dead_letter: "sluice-spec-small", &poison)
      end.to raise_error(Sluice::Errors::ProduceError)
      consumer.commit
      expect(committed_offset).to eq(first)
    end

    it "leave the offset unstored when the producer is closed" do
      first = produce(%w[poison])
      consumer = reader(0 => first)
      closed = build_producer.tap(&:close)
      expect do
        consumer.each_message(dead_letter: { topic: dlq, producer: closed }, &poison)
      end.to raise_error(Sluice::Errors::ProducerClosedError)
      consumer.commit
      expect(committed_offset).to eq(first)
    end

    describe "through a transactional producer" do
      let(:transactional) { build_producer(kafka: { "transactional.id": "sluice-spec-failures-#{rand(1 << 30)}" }) }

      def transactional_reader(offsets)
        consumer = build_consumer(group_id: group, "enable.auto.commit": false)
        consumer.commit(topic => offsets)
        consumer.assign(topic => offsets.keys)
        consumer
      end

      it "commit the dead letter and the message's offset together" do
        first = produce(%w[poison])
        ends = dlq_ends
        consumer = transactional_reader(0 => first)
        consumer.each_message(dead_letter: { topic: dlq, producer: transactional }) do |message|
          raise injected, "poison" if message.offset == first
        ensure
          consumer.stop
        end
        expect(committed_offset).to eq(first + 1) # the transaction's: this consumer never commits
        expect(dead_letters(0, ends[0], 1, isolation: "read_committed").first).to have_attributes(payload: "poison")
      end

      it "commit neither when the transaction fails" do
        first = produce(["x" * 3_000])
        consumer = transactional_reader(0 => first)
        expect do
          consumer.each_message(dead_letter: { topic: "sluice-spec-small", producer: transactional }, &poison)
        end.to raise_error(Sluice::Errors::BaseError)
        expect(committed_offset).to eq(first)
      end

      it "are refused with concurrency above 1 (the transaction's offset could pass an unfinished message)" do
        consumer = transactional_reader(0 => 0)
        expect { consumer.each_message(concurrency: 2, dead_letter: { topic: dlq, producer: transactional }) { nil } }
          .to raise_error(ArgumentError, /concurrency: 1/)
      end
    end
  end

  it "each_batch retries a failed batch, then dead-letters it whole" do
    first = produce(%w[m1 m2 m3])
    ends = dlq_ends
    consumer = reader(0 => first)
    batches = []
    consumer.each_batch(max_items: 2, max_wait: 1_000, retries: { attempts: 2, backoff: 0.01..0.01 }, dead_letter: dlq) do |batch|
      batches << batch.map(&:payload)
      raise injected, "batch fails" if batches.size <= 2

      consumer.stop
    end
    expect(batches).to eq([%w[m1 m2], %w[m1 m2], %w[m3]])
    consumer.commit
    expect(committed_offset).to eq(first + 3)
    expect(dead_letters(0, ends[0], 2).map(&:payload)).to eq(%w[m1 m2])
  end

  it "refuses settings out of range at the call" do
    consumer = build_consumer
    expect { consumer.each_message(retries: { attempts: 0 }) { nil } }.to raise_error(ArgumentError, /attempts/)
    expect { consumer.each_message(retries: { attempts: 2, backoff: 0..1 }) { nil } }.to raise_error(ArgumentError, /backoff/)
    expect { consumer.each_message(dead_letter: :orders) { nil } }.to raise_error(ArgumentError, /topic/)
    expect { consumer.each_batch(dead_letter: { topic: "x", partitioner: :random }) { nil } }.to raise_error(ArgumentError, /partitioner/)
  end
end
