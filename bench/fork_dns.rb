# frozen_string_literal: true

# fork and shell-outs while a client's broker name resolves slowly (issue 19,
# item 5), under the slow-resolver shim of spec/support (names ending in
# ".slow.invalid" take 120 s). Prints, over --rounds rounds: the time of fork,
# system, backticks, IO.popen and Process.spawn, another Ruby thread's longest
# pause, and how many children forked mid-lookup failed to create a client
# that resolves "localhost", delivers and closes within 20 s.
#
#   KAFKA_BROKERS=127.0.0.1:9092 ruby bench/fork_dns.rb [--rounds 20] [--children 300] [--mode fd|thread]
#
# Re-executes itself with the shim preloaded.

require_relative "../spec/support/slow_resolver"
unless ENV["SLOW_RESOLVER_BENCH"]
  env = SlowResolver.env.merge("SLOW_RESOLVER_BENCH" => "1")
  exec(env, RbConfig.ruby, __FILE__, *ARGV)
end

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "sluice"
require "optparse"

options = { rounds: 20, children: 300, mode: :fd }
OptionParser.new do |parser|
  parser.on("--rounds N", Integer) { |n| options[:rounds] = n }
  parser.on("--children N", Integer) { |n| options[:children] = n }
  parser.on("--mode MODE", %w[fd thread]) { |mode| options[:mode] = mode.to_sym }
end.parse!
$stdout.sync = true
BROKERS = ENV.fetch("KAFKA_BROKERS", "127.0.0.1:9092")

def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)

def timed
  started = monotonic
  yield
  monotonic - started
end

def producer(servers, mode, **kafka)
  Sluice::Producer.new do |config|
    config.kafka = { "bootstrap.servers": servers, "linger.ms": 1 }.merge(kafka)
    config.polling.mode = mode
    config.logger = Logger.new(nil)
  end
end

# Another Ruby thread that ticks every millisecond and records its longest gap.
class Ticker
  attr_reader :longest

  def initialize
    @longest = 0.0
    @stop = false
    @thread = Thread.new { tick }
  end

  def stop
    @stop = true
    @thread.join
    self
  end

  private

  def tick
    last = monotonic
    until @stop
      sleep 0.001
      now = monotonic
      @longest = [@longest, now - last].max
      last = now
    end
  end
end

# A child forked mid-lookup: true when its own client delivered and closed in time.
def child_delivers(by_name, mode)
  pid = fork do
    own = producer(by_name, mode, "message.timeout.ms": 15_000)
    ok = own.produce_sync(topic: "sluice-spec-1p", payload: "bench: child forked mid-lookup").error.nil?
    own.close
    exit!(ok ? 0 : 1)
  rescue StandardError
    exit!(1)
  end
  waiter = Process.detach(pid)
  return waiter.value.success? if waiter.join(20)

  Process.kill("KILL", pid)
  waiter.join
  false
end

announcements, announcer = IO.pipe
ENV["SLOW_RESOLVER_FD"] = announcer.fileno.to_s
parent = producer("broker.slow.invalid:9092,#{BROKERS}", options[:mode], "enable.sparse.connections": false)
announcements.read(1) # a broker thread is inside getaddrinfo now, for 120 s

ticker = Ticker.new
calls = {
  "fork" => -> { Process.wait(fork { exit!(0) }) },
  "system" => -> { system("true") },
  "backticks" => -> { `true` },
  "IO.popen" => -> { IO.popen(["true"], &:read) },
  "Process.spawn" => -> { Process.wait(Process.spawn("true")) }
}
puts "mode #{options[:mode]}, #{options[:rounds]} rounds, seconds (min / median / max):"
calls.each do |name, call|
  times = Array.new(options[:rounds]) { timed(&call) }.sort
  puts format("  %-14s %.4f / %.4f / %.4f", name, times.first, times[times.size / 2], times.last)
end
puts format("  another Ruby thread's longest pause: %.4f s\n", ticker.stop.longest)

by_name = BROKERS.split(",").first.sub(/\A[^:]+/, "localhost")
failed = options[:children].times.count { !child_delivers(by_name, options[:mode]) }
puts "  children forked mid-lookup that could not deliver through #{by_name}: #{failed} of #{options[:children]}"
parent.produce_sync(topic: "sluice-spec-1p", payload: "bench: parent after the forks")
exit!(0) # close would wait for the broker thread still inside the 120 s lookup
