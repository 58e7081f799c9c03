# frozen_string_literal: true

# A scenario of spec/integration/fork/fork_dns_spec.rb, in a process of its own, under the slow-resolver
# shim (SlowResolver.env): fork and shell out while a broker thread is inside a 120 s name lookup.
require_relative "../setup"
require_relative "../fork_helpers"
require "io/wait"

def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)

def timed(name, times)
  started = monotonic
  yield
  times[name] = (monotonic - started).round(4)
  puts "#{name}: #{times[name]} s"
end

announcements, announcer = IO.pipe
ENV["SLOW_RESOLVER_FD"] = announcer.fileno.to_s
ENV["SLOW_RESOLVER_HOLD_PID"] = Process.pid.to_s # the real broker's name waits for the slow one's lookup
parent = make_producer(kafka: { "bootstrap.servers": "broker.slow.invalid:9092,#{BROKERS}",
                                "enable.sparse.connections": false })
raise "no broker thread began looking broker.slow.invalid up within 30 s" unless announcements.wait_readable(30)

announcements.read(1) # a broker thread is now inside getaddrinfo, for 120 s

longest_pause = 0.0
stop = false
ticker = Thread.new do
  last = monotonic
  until stop
    sleep 0.001 # a tick: the thread measures how long it could not run
    now = monotonic
    longest_pause = [longest_pause, now - last].max
    last = now
  end
end

times = {}
pid = nil
timed("fork", times) { pid = fork { exit!(0) } }
Process.wait(pid)
timed("system", times) { system("true") }
timed("backticks", times) { `true` }
timed("popen", times) { IO.popen(["true"], &:read) }
timed("spawn", times) { Process.wait(Process.spawn("true")) }
stop = true
ticker.join
puts "longest pause of another thread: #{longest_pause.round(4)} s"

by_name = BROKERS.split(",").first.sub(/\A[^:]+/, "localhost")
child, status = in_child do
  own = make_producer(kafka: { "bootstrap.servers": by_name, "message.timeout.ms": 15_000 })
  report = own.produce_sync(topic: "sluice-spec-1p", payload: "child forked mid-lookup")
  own.close
  { "delivered" => report.error.nil?, "error" => report.error&.message }
end
result("times" => times, "longest_pause" => longest_pause, "child" => child, "child_exit" => status.exitstatus,
       "by_name" => by_name,
       "parent_works" => parent.produce_sync(topic: "sluice-spec-1p", payload: "parent, after forks").error.nil?)
# close would wait for the broker thread still inside the 120 s lookup.
exit!(0)
