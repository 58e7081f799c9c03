# frozen_string_literal: true

# The load the metrics listener specs measure: a producer and a group member,
# both reporting to one monitor with statistics every 100 ms, that move COUNT
# messages through sluice-spec-metrics. Specs include it with ConsumerGroups.
module MetricsLoad
  TOPIC = "sluice-spec-metrics"
  COUNT = 3_000
  STATISTICS = { "statistics.interval.ms": 100 }.freeze

  # A producer and a consumer in the mode under test, the COUNT messages
  # produced and read; the consumer goes on reading (and reporting its lag)
  # until the example ends.
  # @return [Array(Sluice::Producer, Sluice::Consumer)]
  def run_metrics_load(monitor)
    group = "sluice-spec-metrics-#{rand(1 << 30)}"
    start_group_at_end(group, TOPIC)
    consumer = group_consumer(group, kafka: STATISTICS) { |config| config.monitor = monitor }
    consumer.subscribe(TOPIC)
    producer = build_producer(kafka: STATISTICS, monitor: monitor, id: "metrics-#{rand(1 << 30)}")
    (COUNT / 500).times { producer.produce_many_sync(Array.new(500) { |i| { topic: TOPIC, payload: "m#{i}", partition: i % 3 } }) }
    read_all(consumer)
    [producer, consumer]
  end

  def stop_metrics_load
    @metrics_consumer&.stop
    @metrics_reader&.join(10)
    @metrics_consumer&.close
  end

  # Raises unless the block is true within `seconds`; tried again after every
  # statistics emission (where the numbers it looks at change).
  def await_metrics(monitor, seconds = 20)
    emitted = Queue.new
    monitor.subscribe("statistics.emitted") { emitted << true }
    deadline = monotonic_now + seconds
    until yield
      raise "the metrics were not there within #{seconds}s" if monotonic_now > deadline

      Timeout.timeout(seconds, RuntimeError, "no statistics emitted within #{seconds}s") { emitted.pop }
    end
  end

  private

  def read_all(consumer)
    done = Queue.new
    read = 0
    @metrics_consumer = consumer
    @metrics_reader = Thread.new do
      consumer.each_batch(max_wait: 100) do |batch|
        read += batch.size
        done << true if read >= COUNT
      end
    end
    pop_within(done, 30)
  end
end
