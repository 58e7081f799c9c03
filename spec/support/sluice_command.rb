# frozen_string_literal: true

require "open3"
require "securerandom"

# Runs exe/sluice as a subprocess, as a shell would (spec/integration/cli/):
# every run is bounded, a hang fails the example instead of blocking it.
module SluiceCommand
  ROOT = File.expand_path("../..", __dir__)
  COMMAND = [RbConfig.ruby, "-I", File.join(ROOT, "lib"), File.join(ROOT, "exe", "sluice")].freeze
  # What a run sees: the test broker through KAFKA_BROKERS, as an operator's shell would have it.
  def self.environment = { "KAFKA_BROKERS" => TestKafka::BROKERS }

  Result = Struct.new(:stdout, :stderr, :status, :seconds) do
    def code = status.exitstatus
  end

  # @return [Result]
  def sluice(*args, stdin: "", env: {}, timeout: 60)
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    Open3.popen3(SluiceCommand.environment.merge(env), *COMMAND, *args, pgroup: true) do |input, out, err, wait|
      readers = [out, err].map { |io| Thread.new { io.read } }
      writer = Thread.new { feed(input, stdin) }
      unless wait.join(timeout)
        Process.kill("KILL", -wait.pid)
        raise "sluice #{args.join(" ")} did not finish within #{timeout}s:\n#{readers.last.value}"
      end
      writer.join
      Result.new(*readers.map(&:value), wait.value, Process.clock_gettime(Process::CLOCK_MONOTONIC) - started)
    end
  end

  # A command left running (sluice tail): its stdout lines arrive on #lines,
  # its stderr lines on #errors.
  class Running
    attr_reader :lines, :errors, :pid

    def initialize(args, env)
      @stdin, out, err, @wait = Open3.popen3(SluiceCommand.environment.merge(env), *COMMAND, *args, pgroup: true)
      @pid = @wait.pid
      @lines = Queue.new
      @errors = Queue.new
      follow(out, @lines)
      @stderr = follow(err, @errors)
    end

    # The next stdout line, within seconds (:closed once stdout is).
    def next_line(seconds = 30) = next_from(@lines, seconds)

    # The next stderr line, within seconds (:closed once stderr is).
    def next_error(seconds = 30) = next_from(@errors, seconds)

    def signal(name) = Process.kill(name, @pid)

    # Writes to its stdin (false once it stopped reading).
    def write(text)
      @stdin.write(text)
      true
    rescue Errno::EPIPE, IOError
      false
    end

    def close_input = @stdin.close

    # [Process::Status, stderr] once it exits, within seconds (killed after them).
    def finish(seconds = 30)
      unless @wait.join(seconds)
        Process.kill("KILL", -@pid)
        raise "sluice did not exit within #{seconds}s:\n#{@stderr.value}"
      end
      [@wait.value, @stderr.value]
    end

    def kill
      Process.kill("KILL", -@pid) if @wait.alive?
    rescue Errno::ESRCH
      nil
    end

    private

    # Each line to queue (:closed at the end); the thread's value is all of them.
    def follow(stream, queue)
      Thread.new do
        text = +""
        stream.each_line do |line|
          text << line
          queue << line.chomp
        end
        queue << :closed
        text
      end
    end

    def next_from(queue, seconds)
      Timeout.timeout(seconds, RuntimeError, "no line from sluice within #{seconds}s") { queue.pop }
    end
  end

  def start_sluice(*args, env: {}) = Running.new(args, env)

  # Topics of their own for an example group, made up front, deleted after.
  def self.create_topics(partitions_by_name, config: {})
    admin = Sluice::Admin.new { |settings| settings.kafka = { "bootstrap.servers": TestKafka::BROKERS } }
    partitions_by_name.to_h do |name, partitions|
      topic = "sluice-cli-#{name}-#{SecureRandom.hex(4)}"
      admin.create_topic(topic, partitions: partitions, config: config)
      [name, topic]
    end
  ensure
    admin&.close
  end

  def self.delete_topics(topics)
    admin = Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": TestKafka::BROKERS } }
    topics.each { |topic| admin.delete_topic(topic) }
  ensure
    admin&.close
  end

  private

  def feed(input, text)
    input.write(text)
  rescue Errno::EPIPE
    nil # it stopped reading (a usage error): its exit code tells
  ensure
    input.close
  end
end
