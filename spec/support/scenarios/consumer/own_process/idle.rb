# frozen_string_literal: true

# A scenario of spec/integration/consumer/own_process_spec.rb, in a process of its own.
#
# An idle consumer only waits on its fd: the waits must still count as polling.
require_relative "../../setup"
require_relative "helpers"

consumer = make_consumer(**GROUP_TIMERS)
events = record(consumer, "consumer.partitions_assigned", "consumer.partitions_revoked", "error.occurred")
consumer.subscribe("sluice-spec-idle")
consumer.poll(200) until events["consumer.partitions_assigned"].any?
member = Sluice::Native::TestHooks.member_id(consumer.native)
started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
Thread.new do # the application's own timer: 2 x max.poll.interval.ms idle
  sleep 21
  consumer.stop
end
consumer.each_message { raise "nothing is produced to sluice-spec-idle" } # rubocop:disable Lint/UnreachableLoop -- a message is a failure
result(
  "idle_s" => Process.clock_gettime(Process::CLOCK_MONOTONIC) - started,
  "revoked" => events["consumer.partitions_revoked"].size,
  "errors" => events["error.occurred"].map { |e| e[:error].to_s },
  "same_member" => Sluice::Native::TestHooks.member_id(consumer.native) == member,
  "assignment" => consumer.assignment
)
consumer.close
