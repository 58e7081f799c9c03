# frozen_string_literal: true

# Consumers of one group created, read and closed one after another, round
# after round (issue 46): the distribution of close times, and every close
# that outlives its timeout by more than a second, with a dump of every
# thread's backtrace taken while that close still waits.
#
#   ruby bench/close_loop.rb [--consumers 6] [--rounds 100] [--assignor cooperative-sticky]
#                            [--idle 0] [--timeout 10000] [--mode fd] [--brokers 127.0.0.1:9092]
#
# --idle 0 (the six-consumer shape): the closes begin right after the group's
# first assignment, readers still running (each_message), while later members
# are still joining. --idle S (the 100-consumer shape): readers (each_batch)
# run S seconds after every partition is assigned, then each is stopped
# (Consumer#stop) and joined, then the closes.
# Dumps go to tmp/close_loop/; the last line sums up, and the exit status is 1
# if any close outlived its timeout by more than a second.

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "sluice"
require "optparse"
require "fileutils"
require "securerandom"

module Bench
  # A count that threads add to and one waits on, with a timeout (Ruby 3.1's Queue#pop has none).
  class Tally
    def initialize
      @lock = Mutex.new
      @changed = ConditionVariable.new
      @count = 0
    end

    def add(n = 1) = @lock.synchronize { @count += n.tap { @changed.broadcast } }

    # @return [Boolean] the count reached n within seconds
    def wait_for(n, seconds)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
      @lock.synchronize do
        while @count < n
          left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
          return false unless left.positive?

          @changed.wait(@lock, left)
        end
        true
      end
    end
  end

  # One round: a group formed, read, closed.
  class CloseLoop
    TOPIC = "sluice-close-loop"
    PARTITIONS = 6
    DUMPS = File.expand_path("../tmp/close_loop", __dir__)

    def initialize(options)
      @options = options
      @times = []
      @overruns = 0
    end

    def run
      create_topic
      @options[:rounds].times { |round| round(round) }
      summary
    end

    private

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

    def create_topic
      admin = Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": @options[:brokers] } }
      admin.create_topic(TOPIC, partitions: PARTITIONS)
    rescue Sluice::Errors::TopicAlreadyExistsError
      nil
    ensure
      admin&.close
    end

    def consumer(group)
      Sluice::Consumer.new do |config|
        config.kafka = { "bootstrap.servers": @options[:brokers], "group.id": group, "auto.offset.reset": "earliest",
                         "partition.assignment.strategy": @options[:assignor] }
        config.polling.mode = @options[:mode]
        config.logger = Logger.new($stderr, level: Logger::ERROR)
      end
    end

    def round(round)
      group = "sluice-close-loop-#{SecureRandom.hex(4)}"
      consumers = Array.new(@options[:consumers]) { consumer(group) }
      assigned = Tally.new
      consumers.each do |consumer|
        consumer.monitor.subscribe("consumer.partitions_assigned") { |event| assigned.add(event[:partitions].values.flatten.size) }
        consumer.subscribe(TOPIC)
      end
      readers = start_readers(consumers)
      settle(assigned, readers, consumers)
      seconds = consumers.each_with_index.map { |consumer, index| timed_close(consumer, round, index) }
      readers.each(&:join)
      @times.concat(seconds)
      puts "round #{round + 1}: #{seconds.map { |s| s.round(2) }.join(" ")}"
    end

    def start_readers(consumers)
      consumers.map do |consumer|
        Thread.new do
          @options[:idle].zero? ? consumer.each_message { nil } : consumer.each_batch(max_items: 100) { nil }
        rescue Sluice::Errors::ConsumerClosedError
          nil
        end
      end
    end

    # The six-consumer shape closes after the first assignment; the other one
    # waits until every partition is assigned, idles, stops and joins the readers.
    def settle(assigned, readers, consumers)
      assigned.wait_for(1, 60) or abort "no assignment within 60 s"
      return if @options[:idle].zero?

      assigned.wait_for(PARTITIONS, 60) or abort "the group did not assign every partition within 60 s"
      sleep @options[:idle] # the idle period of the report's shape, not a wait for anything
      consumers.each(&:stop)
      readers.each(&:join)
    end

    # Closes with a watchdog that dumps every thread once the close outlived
    # its timeout by a second.
    def timed_close(consumer, round, index)
      done = Tally.new
      limit = (@options[:timeout] / 1000.0) + 1
      watchdog = Thread.new { dump(round, index) unless done.wait_for(1, limit) }
      at = now
      consumer.close(timeout: @options[:timeout])
      seconds = now - at
      done.add
      watchdog.join
      seconds
    end

    def dump(round, index)
      @overruns += 1
      FileUtils.mkdir_p(DUMPS)
      file = File.join(DUMPS, "round-#{round + 1}-close-#{index + 1}.txt")
      File.write(file, Thread.list.map { |thread| "#{thread.inspect}\n  #{(thread.backtrace || []).join("\n  ")}\n" }.join("\n"))
      warn "close #{index + 1} of round #{round + 1} outlived its timeout by a second: threads dumped to #{file}"
    end

    def summary
      sorted = @times.sort
      pick = ->(q) { sorted[[(q * sorted.size).ceil - 1, 0].max].round(2) }
      puts "#{@options[:assignor]} (#{@options[:mode]}), #{@options[:consumers]} consumers x #{@options[:rounds]} rounds: " \
           "closes #{sorted.size}, min #{sorted.first.round(2)} s, p50 #{pick[0.5]}, p90 #{pick[0.9]}, p99 #{pick[0.99]}, " \
           "max #{sorted.last.round(2)}; over 2 s #{sorted.count { |s| s > 2 }}, past the timeout + 1 s #{@overruns}"
      exit(@overruns.zero? ? 0 : 1)
    end
  end
end

options = { consumers: 6, rounds: 100, assignor: "cooperative-sticky", idle: 0, timeout: 10_000, mode: :fd,
            brokers: ENV.fetch("KAFKA_BROKERS", "127.0.0.1:9092") }
OptionParser.new do |parser|
  parser.on("--consumers N", Integer) { |n| options[:consumers] = n }
  parser.on("--rounds N", Integer) { |n| options[:rounds] = n }
  parser.on("--assignor NAME") { |name| options[:assignor] = name }
  parser.on("--idle SECONDS", Float) { |s| options[:idle] = s }
  parser.on("--timeout MS", Integer) { |ms| options[:timeout] = ms }
  parser.on("--mode MODE", %w[fd thread]) { |mode| options[:mode] = mode.to_sym }
  parser.on("--brokers LIST") { |list| options[:brokers] = list }
end.parse!
Bench::CloseLoop.new(options).run
