# frozen_string_literal: true

# Helpers of the concurrent each_message specs (consumer/parallel_spec.rb on
# threads, consumer/parallel_fibers_spec.rb on fibers); groups include it
# explicitly (`include ParallelReads`) and define `topic`, `group` and `producer`.
module ParallelReads
  def build_consumer(group_id: group, **kafka) = super(group_id: group_id, "auto.offset.reset": "earliest", **kafka)

  # Produces payloads (with keys, if given) to a partition; returns the first offset.
  def produce(payloads, partition: 0, keys: nil)
    reports = payloads.each_with_index.map do |payload, i|
      producer.produce_async(topic: topic, partition: partition, payload: payload, key: keys&.fetch(i))
    end
    reports.map(&:wait).first.offset
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
