# frozen_string_literal: true

# A scenario of spec/integration/consumer/own_process_spec.rb, in a process of its own.
require_relative "../../setup"
require_relative "helpers"

producer = make_producer
report = producer.produce_sync(topic: "sluice-spec-idle-reads", payload: "x")
cycle = lambda do
  consumer = make_consumer
  consumer.assign("sluice-spec-idle-reads" => { 0 => report.offset })
  consumer.each_message { consumer.stop }
  consumer.close
end
rss = -> { File.read("/proc/self/status")[/VmRSS:\s+(\d+)/, 1].to_i }
10.times { cycle.call }
GC.start
before = { "fds" => fds, "threads" => os_threads, "rss_kb" => rss.call }
40.times { cycle.call }
GC.start
after = { "fds" => fds, "threads" => os_threads, "rss_kb" => rss.call }
result("before" => before, "after" => after)
producer.close
