# frozen_string_literal: true

# A scenario of spec/integration/lifecycle/leaks_spec.rb, in a process of its own.
#
# Phase "churn": the poller keeps running for a long-lived producer while
# 200 others come and go. Phase "restart": nothing else is open, so in :fd
# mode the poller thread stops and starts again on every cycle.
require_relative "../setup"

# A thread may end between the listing and the read (Ruby's cached native threads do): not counted.
comm = ->(f) { File.read(f) rescue "" } # rubocop:disable Style/RescueModifier
rdk_threads = -> { Dir["/proc/self/task/*/comm"].count { |f| comm.call(f).start_with?("rdk:") } }
snapshot = lambda do
  { "fds" => fds, "ruby_threads" => Thread.list.count(&:alive?), "rdk_threads" => rdk_threads.call,
    "os_threads" => os_threads }
end
# The first snapshot back to `before`'s counts, or the one taken 10 s on: the threads of the
# producers still open change while they run (the keeper's bootstrap connection's thread goes
# once the broker's own is up), and nothing signals when. A leak stays, and fails all the same.
settled = lambda do |before|
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
  loop do
    now = snapshot.call
    back = %w[fds ruby_threads rdk_threads].all? { |what| now[what] <= before[what] } &&
           now["os_threads"] <= before["os_threads"] + 1
    break now if back || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

    sleep 0.05
  end
end
cycle = lambda do |i|
  producer = make_producer
  producer.produce_sync(topic: "sluice-spec-1p", payload: "cycle #{i}") if (i % 20).zero? # some connect
  producer.close
end
make_producer.tap { |p| p.produce_sync(topic: "sluice-spec-1p", payload: "warm-up") }.close
r = { "mode" => MODE }
poller = Sluice::Polling::Poller.instance

keeper = make_producer
keeper.produce_sync(topic: "sluice-spec-1p", payload: "keeper")
r["churn_before"] = snapshot.call
one = make_producer
r["churn_with_one_more"] = snapshot.call # the measurement sees a producer's fds and threads
one.close
200.times(&cycle)
r["churn_after"] = settled.call(r["churn_before"])
r["churn_poller"] = [poller.alive?, poller.count]
r["keeper_delivers"] = keeper.produce_sync(topic: "sluice-spec-1p", payload: "keeper, after").error.nil?
keeper.close

r["restart_before"] = snapshot.call
200.times(&cycle)
r["restart_after"] = settled.call(r["restart_before"])
r["restart_poller"] = [poller.alive?, poller.count]
r["sluice_threads"] = sluice_thread_names
result(r)
