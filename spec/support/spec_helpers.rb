# frozen_string_literal: true

# Helpers for building producers in the mode under test and reading messages back.
module SpecHelpers
  # A producer in the polling mode under test (SLUICE_POLLING_MODE), closed after the example.
  def build_producer(kafka: {}, mode: TestKafka::MODE, **settings)
    producer = Sluice::Producer.new do |config|
      config.kafka = { "bootstrap.servers": TestKafka::BROKERS, "linger.ms": 1 }.merge(kafka)
      config.polling.mode = mode
      config.logger = Logger.new(nil)
      settings.each { |name, value| config.public_send(:"#{name}=", value) }
      yield config if block_given?
    end
    test_producers << producer
    producer
  end

  def test_producers = (@test_producers ||= [])

  def close_test_producers
    test_producers.each { |producer| producer.close(timeout: 10_000) }
  end

  # A consumer in the polling mode under test, of a group of its own unless
  # told, closed after the example. kafka: more librdkafka settings.
  def build_consumer(group_id: "sluice-spec-#{rand(1 << 30)}", **kafka)
    consumer = Sluice::Consumer.new do |config|
      config.kafka = { "bootstrap.servers": TestKafka::BROKERS, "group.id": group_id }.merge(kafka)
      config.polling.mode = TestKafka::MODE
      config.logger = Logger.new(nil)
      yield config if block_given?
    end
    test_consumers << consumer
    consumer
  end

  def test_consumers = (@test_consumers ||= [])

  def close_test_consumers = test_consumers.each(&:close)

  # Reads `count` messages of topic/partition starting at offset.
  # @return [Array<Hash>] topic:, partition:, offset:, key:, payload:, headers: [[k, v]], timestamp: (ms)
  def consume(topic, partition, offset, count, isolation: "read_uncommitted", timeout: 20)
    consumer = reader(isolation)
    consumer.assign(topic => { partition => offset })
    read_messages(consumer, count, timeout)
  ensure
    consumer&.close
  end

  # A consumer that reads by assignment (no group membership, no commits).
  def reader(isolation, brokers: TestKafka::BROKERS)
    Sluice::Consumer.new do |config|
      config.kafka = { "bootstrap.servers": brokers, "group.id": "sluice-spec-#{rand(1 << 30)}", "enable.auto.commit": false,
                       "isolation.level": isolation, "enable.partition.eof": false }
      config.logger = Logger.new(nil)
    end
  end

  # The messages behind delivery reports, in report order.
  def consume_reports(reports)
    reports.group_by { |r| [r.topic, r.partition] }.flat_map do |(topic, partition), group|
      first = group.map(&:offset).min
      last = group.map(&:offset).max
      by_offset = consume(topic, partition, first, last - first + 1).to_h { |m| [m[:offset], m] }
      group.map { |r| by_offset.fetch(r.offset) }
    end
  end

  # A broker address where nothing listens: messages stay queued, librdkafka reports errors.
  UNREACHABLE = "127.0.0.1:1"

  # A producer that can never deliver. Its messages stay queued, so the example
  # must close! it (or close with a timeout): a plain close would wait for them.
  def build_unreachable_producer(kafka: {}, **settings, &block)
    build_producer(kafka: { "bootstrap.servers": UNREACHABLE }.merge(kafka), **settings, &block)
  end

  # An admin client that reaches no broker: for what it refuses or decides before anything is sent.
  def build_unreachable_admin
    Sluice::Admin.new do |config|
      config.kafka = { "bootstrap.servers": UNREACHABLE }
      config.max_wait_timeout = 1_000
      config.logger = Logger.new(nil)
    end
  end

  # Waits (at most `seconds`) for an item on a Queue; fails the example instead of hanging.
  def pop_within(queue, seconds = 10)
    Timeout.timeout(seconds, RuntimeError, "nothing arrived on the queue within #{seconds}s") { queue.pop }
  end

  # Records a monitor's events and lets a spec wait for one, without sleeping.
  class EventRecorder
    def initialize(monitor, *names)
      @mutex = Mutex.new
      @arrived = ConditionVariable.new
      @events = []
      names.each { |name| monitor.subscribe(name) { |event| record(event) } }
    end

    def events = @mutex.synchronize { @events.dup }

    # @return [Sluice::Monitor::Event] the first recorded event the block accepts
    def await(seconds = 10, &matcher)
      matcher ||= ->(_) { true }
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
      @mutex.synchronize do
        loop do
          found = @events.find(&matcher)
          return found if found

          left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
          raise "no matching event within #{seconds}s (got: #{@events.map { |e| [e.id, e[:type]].compact }.inspect})" if left <= 0

          @arrived.wait(@mutex, left)
        end
      end
    end

    private

    def record(event)
      @mutex.synchronize do
        @events << event
        @arrived.broadcast
      end
    end
  end

  def record_events(monitor, *names) = EventRecorder.new(monitor, *names)

  # Payloads a read_committed consumer sees in topic's partition 0 from
  # offset up to a marker (produced afterwards by a plain producer, so the read ends).
  def committed_since(topic, offset)
    marker = "marker-#{SecureRandom.hex(4)}"
    build_producer.produce_sync(topic: topic, partition: 0, payload: marker)
    consume_until(topic, 0, offset, isolation: "read_committed") { |m| m[:payload] == marker }.map { |m| m[:payload] } - [marker]
  end

  # Reads topic/partition from offset until the block accepts a message (that
  # message included): for topics other runs may write to at the same time.
  # @return [Array<Hash>] as #consume
  def consume_until(topic, partition, offset, isolation: "read_uncommitted", timeout: 20)
    consumer = reader(isolation)
    consumer.assign(topic => { partition => offset })
    messages = []
    messages.concat(read_messages(consumer, 1, timeout)) until messages.last && yield(messages.last)
    messages
  ensure
    consumer&.close
  end

  # A fatal error in a producer's native client, as librdkafka raises when
  # idempotence breaks: a real broker does not fail that way on demand.
  def break_idempotence(client, reason)
    Sluice::Native::TestHooks.fatal_error(client, Sluice::KafkaError.number_for(:out_of_order_sequence_number), reason)
  end

  # Counts this process's open fds and live Ruby threads.
  def open_fds = Dir.children("/proc/self/fd").size
  def live_threads = Thread.list.count(&:alive?)

  # A Ruby script run in its own process (fork, close-from-callback, ... can
  # wedge a process). Returns [stdout+stderr, Process::Status].
  def run_scenario(code, timeout: 60, env: {})
    script = "$LOAD_PATH.unshift(#{File.expand_path("../../lib", __dir__).inspect}); require 'sluice'\n" \
             "BROKERS = #{TestKafka::BROKERS.inspect}; MODE = #{TestKafka::MODE.inspect}\n#{code}"
    run_scenario_process([RbConfig.ruby, "-e", script], timeout: timeout, env: env)
  end

  # The same for a scenario file (spec/support/scenarios/<area>/<name>.rb, which requires
  # scenarios/setup.rb), given args as ARGV and the brokers and polling mode under test.
  def run_scenario_file(path, *args, timeout: 60, env: {})
    env = { "KAFKA_BROKERS" => TestKafka::BROKERS, "SLUICE_POLLING_MODE" => TestKafka::MODE.to_s }.merge(env)
    run_scenario_process([RbConfig.ruby, path, *args.map(&:to_s)], timeout: timeout, env: env)
  end

  def run_scenario_process(command, timeout:, env:)
    require "open3"
    # A process group of its own: a timeout kills the children it forked too
    # (they hold its output open, and the read below would wait for them).
    Open3.popen2e(env, *command, pgroup: true) do |stdin, out, wait|
      stdin.close
      reader = Thread.new { out.read }
      unless wait.join(timeout)
        Process.kill("KILL", -wait.pid)
        raise "scenario did not finish within #{timeout}s:\n#{reader.value}"
      end
      [reader.value, wait.value]
    end
  end

  # Polls the consumer (poll_ms a poll) until it handed out count messages or seconds passed.
  # @return [Array<Sluice::Message>] fewer than count when the time ran out
  def poll_messages(consumer, count, seconds: 20, poll_ms: 250)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
    messages = []
    while messages.size < count && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      message = consumer.poll(poll_ms)
      messages << message if message
    end
    messages
  end

  # Polls a subscribed consumer until it hands out payload (up to timeout s).
  # @return [String, nil] the last payload read: payload, or what came instead
  def poll_until_payload(consumer, payload, timeout: 30)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    seen = nil
    seen = consumer.poll(500)&.payload until seen == payload || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
    seen
  end

  private

  def read_messages(consumer, count, timeout)
    messages = poll_messages(consumer, count, seconds: timeout, poll_ms: 500).map do |m|
      { topic: m.topic, partition: m.partition, offset: m.offset, key: m.key, payload: m.payload,
        headers: m.header_pairs, timestamp: m.timestamp_ms }
    end
    raise "read #{messages.size} of #{count} messages within #{timeout}s" if messages.size < count

    messages
  end
end
