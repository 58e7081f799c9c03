# frozen_string_literal: true

# A scenario of spec/integration/lifecycle/interrupted_calls_spec.rb, in a process of its own.
#
# An interrupt already pending when a call reaches the gate is raised
# there, before the call runs: the partition list built for it must be
# freed all the same. Thread.handle_interrupt(:on_blocking) makes it
# pending exactly there, 20,000 times (50 partitions each); the lists
# leaked used to add ~95 MB.
require_relative "../../setup"

consumer = Sluice::Consumer.new do |config|
  config.kafka = { "bootstrap.servers": BROKERS, "group.id": "sluice-spec-interrupted-commit" }
  config.logger = Logger.new(nil)
end
native = consumer.instance_variable_get(:@client) # straight to the gate: no Ruby wait before it
offsets = Array.new(50) { |partition| ["sluice-spec-idle", partition, 1] }
rss = -> { File.read("/proc/self/status")[/VmRSS:\s+(\d+)/, 1].to_i }
interrupted = 0
commits = lambda do |count|
  count.times do
    Thread.handle_interrupt(RuntimeError => :never) do
      Thread.current.raise "pending"
      Thread.handle_interrupt(RuntimeError => :on_blocking) { native.commit(offsets, false) }
    rescue RuntimeError
      interrupted += 1
    end
  end
end
commits.call(2_000)
GC.start
before = rss.call
commits.call(20_000)
GC.start
result("interrupted" => interrupted, "rss_growth_kb" => rss.call - before)
consumer.close
