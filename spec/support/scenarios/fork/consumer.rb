# frozen_string_literal: true

# A scenario of spec/integration/fork/fork_spec.rb, in a process of its own.
#
# A consumer read by a parent thread at fork time: that reader does not
# exist in the child, whose calls and exit must not wait for it (issue 26).
require_relative "../setup"
require_relative "../fork_helpers"

consumer = Sluice::Consumer.new do |config|
  config.kafka = { "bootstrap.servers": BROKERS, "group.id": "sluice-fork-#{rand(1 << 30)}" }
  config.polling.mode = MODE
  config.logger = Logger.new(nil)
end
consumer.assign("sluice-spec-1p" => [0])
reading = Queue.new
reader = Thread.new { consumer.each_message { nil }.tap { reading << :done } }
sleep 0.01 until consumer.instance_variable_get(:@inbox).reading? # the parent's reader is in each_message
child, status = in_child do
  c = { "poll" => forked_error { consumer.poll(100) }, "each_message" => forked_error { consumer.each_message { nil } } }
  at = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  consumer.close
  c["close_seconds"] = Process.clock_gettime(Process::CLOCK_MONOTONIC) - at
  c["closed"] = consumer.closed?
  c
end
started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
_, at_exit_status = in_child { { "pid" => Process.pid } } # the at-exit close of the inherited consumer
seconds = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
result("child" => child, "child_exit" => status.exitstatus, "at_exit_child_seconds" => seconds,
       "at_exit_child_exit" => at_exit_status.exitstatus, "parent_reads" => reader.alive?)
consumer.close
reader.join
