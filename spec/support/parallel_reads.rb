# frozen_string_literal: true

# The parallel reads' topic, one per rspec process: their examples read what
# they produced from its first offset on, so another process's messages
# landing meanwhile would be read as theirs (a :key example saw them).
module ParallelReadsTopic
  NAME = "sluice-spec-parallel#{ENV.fetch("TEST_ENV_NUMBER", "")}".freeze
end

# Helpers of the concurrent each_message specs (consumer/parallel_spec.rb on
# threads, consumer/parallel_fibers_spec.rb on fibers, and the others that
# include it explicitly: `include ParallelReads`). It gives them the topic they
# share, a producer, and a consumer group of their own per example.
module ParallelReads
  def self.included(example_group)
    example_group.let(:topic) { ParallelReadsTopic::NAME }
    example_group.let(:group) { "sluice-spec-#{File.basename(self.class.metadata[:file_path], "_spec.rb")}-#{rand(1 << 30)}" }
    example_group.let(:producer) { build_producer }
  end

  def build_consumer(group_id: group, **kafka) = super(group_id: group_id, "auto.offset.reset": "earliest", **kafka)

  # Produces payloads (with keys, if given) to a partition; returns the first offset.
  def produce(payloads, partition: 0, keys: nil)
    reports = payloads.each_with_index.map do |payload, i|
      producer.produce_async(topic: topic, partition: partition, payload: payload, key: keys&.fetch(i))
    end
    reports.map(&:wait).first.offset
  end

  # Produces count messages ("m0", "m1", ...) to partition 0.
  # @return [Array(Sluice::Consumer, Integer)] a reader from the first of them, and its offset
  def reader_of(count)
    first = produce(Array.new(count) { |i| "m#{i}" })
    [reader(0 => first), first]
  end

  # The group's committed offset of the partition (-1001: none), as its next member sees it.
  def committed_offset(partition = 0)
    consumer = build_consumer
    consumer.assign(topic => [partition])
    consumer.committed.fetch(topic).fetch(partition)
  ensure
    consumer.close
  end

  # A consumer of a fresh group on the partitions given, from those offsets,
  # which the group commits first: a later member starts there, not at the
  # topic's beginning, unless more was committed.
  def reader(offsets)
    consumer = build_consumer
    consumer.commit(topic => offsets)
    consumer.assign(topic => offsets)
    consumer
  end

  # Each partition gets the keys in order. Key "slow"'s first block on
  # partition 0 waits until `others` blocks of other keys finished; the log
  # says when each block started and ended (read_concurrently and wait_pop:
  # spec/support/parallel_read_examples.rb).
  def run_keys(ordering, layout, others:)
    firsts = layout.to_h { |p, keys| [p, produce(keys.each_with_index.map { |k, i| "#{k}-#{i}" }, partition: p, keys: keys)] }
    consumer = reader(firsts)
    log = Queue.new
    others_done = Queue.new
    total = layout.values.sum(&:size)
    ended = 0
    lock = Mutex.new
    read_concurrently do
      consumer.each_message(concurrency: 8, ordering: ordering) do |message|
        record_where
        log << [:start, message.partition, message.key, message.offset]
        wait_pop(others_done) if message.key == "slow" && message.partition.zero? && message.offset == firsts[0]
        log << [:end, message.partition, message.key, message.offset]
        lock.synchronize do
          ended += 1
          others_done << true if message.key != "slow" && (others -= 1).zero?
          consumer.stop if ended == total
        end
      end
    end
    Array.new(log.size) { log.pop }
  end

  def started_before_end(log, first, second)
    log.index([:start, *second]) < log.index([:end, *first])
  end

  # Reads in the calling thread what a new member of the group hands out, up to count messages.
  def reread(count, partition: 0)
    consumer = build_consumer
    consumer.assign(topic => [partition])
    seen = []
    consumer.each_message do |message|
      seen << message.offset
      consumer.stop if seen.size >= count
    end
    consumer.close
    seen
  end
end
