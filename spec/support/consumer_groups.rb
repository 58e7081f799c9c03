# frozen_string_literal: true

require "open3"
require "set"
require_relative "condition_wait"

# Helpers of the consumer-group specs (spec/integration/consumer/groups_spec.rb,
# consumer/crash_recovery_spec.rb); groups include it explicitly
# (`include ConsumerGroups`).
#
# Their topics are shared by every run, so each example uses a new group that
# starts at the topics' current end (#start_group_at_end) and tags its payloads
# ("<tag>:<seq>"): what earlier or concurrent runs left there is not counted.
module ConsumerGroups
  # Every member of these specs: a member that leaves is replaced at once, a
  # SIGKILLed one after session.timeout.ms (6 s: the broker's minimum), and
  # heartbeats tell the others about a rebalance within half a second.
  GROUP_SETTINGS = { "auto.offset.reset": "earliest", "session.timeout.ms": 6_000, "heartbeat.interval.ms": 500 }.freeze

  # A consumer of group in the polling mode under test (not subscribed yet).
  def group_consumer(group, kafka: {}, &block)
    Sluice::Consumer.new do |config|
      config.kafka = { "bootstrap.servers": TestKafka::BROKERS, "group.id": group }.merge(GROUP_SETTINGS, kafka)
      config.polling.mode = TestKafka::MODE
      config.logger = Logger.new(nil)
      block&.call(config)
    end
  end

  # Commits the topic's current end offsets for group, which has no member
  # yet: its members read what is produced from now on.
  # @return [Hash{Integer => Integer}] partition => start offset
  def start_group_at_end(group, topic)
    with_outsider(group) do |outsider|
      ends = end_offsets(outsider, topic)
      outsider.assign(topic => ends)
      outsider.commit(topic => ends) # no message read: nothing stored, so these explicit offsets

      ends
    end
  end

  # @return [Hash{Integer => Integer}] partition => the offset after its last message
  def end_offsets(consumer, topic)
    Array.new(partition_count(topic)) { |partition| [partition, consumer.query_watermark_offsets(topic, partition).last] }.to_h
  end

  def partition_count(topic) = TestKafka::TOPICS.fetch(topic).first

  # A consumer with group's group.id that never joins it (assign, paused, no
  # commits): it reads the group's committed offsets. Closed by the caller.
  def outsider(group, topic = nil)
    consumer = Sluice::Consumer.new do |config|
      config.kafka = { "bootstrap.servers": TestKafka::BROKERS, "group.id": group, "enable.auto.commit": false,
                       "isolation.level": "read_uncommitted" }
      config.logger = Logger.new(nil)
    end
    return consumer unless topic

    consumer.assign(topic => Array.new(partition_count(topic)) { |partition| partition })
    partition_count(topic).times { |partition| consumer.pause(topic, partition) }
    consumer
  end

  def with_outsider(group, topic = nil)
    consumer = outsider(group, topic)
    yield consumer
  ensure
    consumer&.close
  end

  # Every message of topic from the given offsets to the end of each
  # partition (with read_committed: its last stable offset).
  # @return [Array<Sluice::Message>]
  def read_to_end(topic, from, isolation:, timeout: 30)
    consumer = Sluice::Consumer.new do |config|
      config.kafka = { "bootstrap.servers": TestKafka::BROKERS, "group.id": "sluice-spec-reader-#{rand(1 << 30)}",
                       "enable.auto.commit": false, "isolation.level": isolation, "enable.partition.eof": true }
      config.logger = Logger.new(nil)
    end
    at_end = Set.new
    consumer.monitor.subscribe("consumer.partition_eof") { |event| at_end << event[:partition] }
    consumer.assign(topic => from)
    read_until(consumer, timeout) { at_end.size == from.size }
  ensure
    consumer&.close
  end

  def read_until(consumer, timeout)
    deadline = monotonic_now + timeout
    messages = []
    until yield
      raise "not at the end of every partition within #{timeout}s (#{messages.size} messages read)" if monotonic_now > deadline

      message = consumer.poll(500)
      messages << message if message
    end
    messages
  end

  def monotonic_now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # [seq, ...] of the messages carrying this run's tag ("<tag>:<seq>").
  def tagged(messages, tag)
    prefix = "#{tag}:"
    messages.filter_map { |m| Integer(m.payload.delete_prefix(prefix)) if m.payload&.start_with?(prefix) }
  end

  # What a group's members share with the example: one lock and one
  # condition, signalled on every change, that the example waits on.
  class Board
    include ConditionWait

    # Payloads handed out by any member (under the lock).
    attr_reader :seen

    def initialize
      @lock = Mutex.new
      @changed = ConditionVariable.new
      @seen = Set.new
    end

    def update
      @lock.synchronize do
        yield
      ensure
        @changed.broadcast
      end
    end

    def read(&block) = @lock.synchronize(&block)

    def inspect = "#<#{self.class.name} #{@seen.size} seen>"

    # Waits (at most seconds) until the block, run under the lock, is true.
    def await(what, seconds = 30, &condition)
      @lock.synchronize { wait_for(seconds, &condition) } or raise RSpec::Expectations::ExpectationNotMetError, "#{what}: not within #{seconds}s"
    end
  end

  # One group member reading in a thread of its own, with each_message or
  # each_batch (and, with pace, sleeping that long per message). It records, in
  # its reading thread, its assignment as the rebalance events change it and
  # every message as it is handed out, and
  # checks each one there: its partition is assigned to this member right now,
  # and its offset is past the last one handed out of that partition since the
  # partition was assigned (nothing fetched before a revoke comes out after it).
  class Member
    attr_reader :name, :consumer, :owned, :timeline, :handed_out, :violations, :errors

    def initialize(name, consumer, topic, board, batch: false, pace: nil)
      @name = name
      @consumer = consumer
      @topic = topic
      @board = board
      @batch = batch
      @pace = pace
      @owned = Set.new
      @timeline = [] # [:assigned | :revoked, [partition, ...], owned after, messages handed out by then]
      @handed_out = [] # [partition, offset, payload]
      @last_offset = {}
      @violations = []
      @errors = [] # "type: code" of its error.occurred events (a failed commit before a revoke: duplicates)
      watch_rebalances
    end

    def start
      @thread = Thread.new { read }
      @thread.name = "member #{@name}"
      self
    end

    # The reading thread's outcome: re-raises what ended it.
    def join = @thread.value

    def reading? = @thread&.alive?

    # Under the board's lock.
    def count = @handed_out.size
    def inspect = "#<#{self.class.name} #{@name}>"

    def revoked_everything? = @timeline.any? { |kind, _, after| kind == :revoked && after.empty? }

    private

    def read
      @consumer.subscribe(@topic)
      if @batch
        @consumer.each_batch(max_items: 50, max_wait: 50) { |messages| hand_out(messages) }
      else
        @consumer.each_message do |message|
          hand_out([message])
          sleep(@pace) if @pace
        end
      end
    end

    def watch_rebalances
      @consumer.monitor.subscribe("consumer.partitions_assigned") { |event| rebalanced(:assigned, event) }
      @consumer.monitor.subscribe("consumer.partitions_revoked") { |event| rebalanced(:revoked, event) }
      @consumer.monitor.subscribe("error.occurred") do |event|
        code = event[:error].respond_to?(:code) ? event[:error].code : event[:error].class.name
        @board.update { @errors << "#{event[:type]}: #{code}" }
      end
    end

    def rebalanced(kind, event)
      partitions = event[:partitions].fetch(@topic, [])
      @board.update do
        kind == :assigned ? @owned.merge(partitions) : @owned.subtract(partitions)
        partitions.each { |partition| @last_offset.delete(partition) }
        @timeline << [kind, partitions, @owned.to_a.sort, @handed_out.size]
      end
    end

    def hand_out(messages)
      @board.update { messages.each { |message| check(message) } }
    end

    def check(message)
      partition = message.partition
      @violations << "#{@name} got #{partition}@#{message.offset}, owning #{@owned.to_a.sort}" unless @owned.include?(partition)
      last = @last_offset[partition]
      @violations << "#{@name} got #{partition}@#{message.offset} after #{partition}@#{last}" if last && message.offset <= last
      @last_offset[partition] = message.offset
      @handed_out << [partition, message.offset, message.payload]
      @board.seen << message.payload
    end
  end

  # spec/support/scenarios/crash_consumer.rb in a process of its own: its
  # stdout lines go to `lines` as [self, line] (then [self, :exited]).
  class Worker
    SCRIPT = File.expand_path("scenarios/crash_consumer.rb", __dir__)
    LIB = File.expand_path("../../lib", __dir__)

    attr_reader :progress

    # script: another process that speaks the same way (lines on stdout, stops when its stdin closes):
    # bench/upgrade/client.rb's producers and lag poller.
    def initialize(env, lines, script: SCRIPT)
      @stdin, stdout, stderr, @process = Open3.popen3(env, RbConfig.ruby, "-I", LIB, script)
      @errors = Thread.new { stderr.read }
      @progress = 0 # seen or committed payloads it reported
      Thread.new do
        stdout.each_line { |line| lines << [self, line.chomp] }
        lines << [self, :exited]
      end
    end

    def reported(count) = @progress += count

    def running? = @process.alive?

    def pid = @process.pid

    # A line to its stdin (crash_consumer.rb: "pace <seconds>"). A worker that is gone is not told.
    def tell(line)
      @stdin.write("#{line}\n")
    rescue IOError, Errno::EPIPE
      nil
    end

    def kill
      Process.kill("KILL", @process.pid)
      @process.value
    end

    # Closes its stdin: it stops reading, closes its clients and exits.
    # @return [Process::Status]
    def finish(timeout = 30)
      @stdin.close
      return @process.value if @process.join(timeout)

      kill
      raise "the consumer process did not exit within #{timeout}s after its stdin was closed:\n#{stderr_output}"
    end

    def stderr_output = @errors.value

    # @return [Process::Status] once it has exited
    def status = @process.value
  end
end
