# frozen_string_literal: true

require "async" # Debian's ruby-async (1.30): Async::Scheduler is a Fiber.scheduler
require "set"

# The Async twin of interrupted_reads_spec.rb: Thread.handle_interrupt holds
# off Thread#raise, not Fiber#raise, and Async's Task#stop is a Fiber#raise
# (Async 1.x resumes the fiber with the exception, Async 2 raises it in): it
# lands in any wait, masked or not. A revocation's wait for running blocks
# stopped: the rebalance is still answered, and the group reads on.
# (The other waits a stop cuts short, without a broker: spec/sluice/consumer/inbox_spec.rb,
# producer/transactions_spec.rb, client_life_spec.rb, blocking_spec.rb.)
RSpec.describe "Consumer reads stopped by Async's Task#stop", :kafka do
  include ConsumerGroups

  let(:topic) { "sluice-spec-cgroup" } # 6 partitions
  let(:group) { "sluice-spec-stopped-#{rand(1 << 30)}" }

  def pop_in_time(queue, seconds = 20) = Async::Task.current.with_timeout(seconds) { queue.pop }

  def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  def drain(queue) = Array.new(queue.size) { queue.pop }

  it "answers a revocation whose wait for running blocks a Task#stop cut short, and the group reads on" do
    count = 120
    tag = "stopped-#{rand(1 << 40)}"
    start_group_at_end(group, topic)
    build_producer.produce_many_sync(Array.new(count) { |i| { topic: topic, partition: i % 6, payload: "#{tag}:#{i}" } })
    seen = Set.new
    lock = Mutex.new
    record = ->(message) { lock.synchronize { seen.merge(tagged([message], tag)) } }
    first, second = Array.new(2) { group_consumer(group).tap { |consumer| test_consumers << consumer } }
    revoke_waiting = Queue.new
    revoked = Queue.new
    assigned_to_second = Queue.new
    first.monitor.subscribe("consumer.revoke_waiting") { revoke_waiting << true }
    first.monitor.subscribe("consumer.partitions_revoked") { |event| revoked << event[:partitions] }
    second.monitor.subscribe("consumer.partitions_assigned") { |event| assigned_to_second << event[:partitions] }
    first.subscribe(topic)
    second_reader = nil
    Async do
      started = Queue.new
      hold = Queue.new # never fed: the first block runs until its task is stopped
      held = false
      reader = Async do
        first.each_message(concurrency: 2) do |message|
          record.call(message)
          next if held

          held = true
          started << true
          hold.pop
        end
      end
      pop_in_time(started)
      second.subscribe(topic) # the group rebalances: the first member's revocation waits for the held block
      second_reader = Thread.new { second.each_message { |message| record.call(message) } }
      pop_in_time(revoke_waiting, 30)
      reader.stop

      Async { first.each_message(concurrency: 2) { |message| record.call(message) } } # the stopped member reads on
      # Polled with a deadline: every message read, and the second member given partitions (within 30 ms
      # here; with the revocation unanswered, the group waited 30 s for the first member).
      deadline = monotonic + 10
      Async::Task.current.sleep(0.05) until (lock.synchronize { seen.size } >= count && !assigned_to_second.empty?) || monotonic > deadline
      first.stop
    end.wait
    second.stop
    second_reader.join

    expect(count.times.reject { |number| seen.include?(number) }).to eq([])
    expect(drain(revoked)).not_to be_empty # the revocation the stop cut short was answered
    expect(drain(assigned_to_second).reduce({}, :merge)).not_to be_empty
  end
end
