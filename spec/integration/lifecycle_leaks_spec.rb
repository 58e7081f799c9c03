# frozen_string_literal: true

# 200 create/close cycles in a fresh process (nothing else there opens or
# collects fds or threads meanwhile), in the mode under test: the wake-up pipe
# (:fd), the producer's thread (:thread) and librdkafka's own threads ("rdk:*")
# and sockets must all go away with each close. The process's native thread
# count may stay one higher: Ruby keeps the native thread of a finished Ruby
# thread (the poller's, a producer's) cached for reuse for a few seconds.
RSpec.describe "Producer create/close cycles", :kafka do
  include PollingScenarios

  before(:context) do
    # Phase "churn": the poller keeps running for a long-lived producer while
    # 200 others come and go. Phase "restart": nothing else is open, so in :fd
    # mode the poller thread stops and starts again on every cycle.
    @scenarios = start_scenarios(cycles: <<~'RUBY')
      rdk_threads = -> { Dir["/proc/self/task/*/comm"].count { |f| File.read(f).start_with?("rdk:") } }
      snapshot = lambda do
        { "fds" => fds, "ruby_threads" => Thread.list.count(&:alive?), "rdk_threads" => rdk_threads.call,
          "os_threads" => os_threads }
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
      r["churn_after"] = snapshot.call
      r["churn_poller"] = [poller.alive?, poller.count]
      r["keeper_delivers"] = keeper.produce_sync(topic: "sluice-spec-1p", payload: "keeper, after").error.nil?
      keeper.close

      r["restart_before"] = snapshot.call
      200.times(&cycle)
      r["restart_after"] = snapshot.call
      r["restart_poller"] = [poller.alive?, poller.count]
      r["sluice_threads"] = sluice_thread_names
      result(r)
    RUBY
  end

  let(:outcome) { scenario_outcome(@scenarios, :cycles) }

  # A leak is growth. Fewer is not a leak: librdkafka may close connections
  # that were open when the measurement began (with 2.15.0, 17 fds became 15).
  def expect_no_leak(before, after)
    %w[fds ruby_threads rdk_threads].each do |what|
      expect(after[what]).to be <= before[what], "#{what}: #{before[what]} before, #{after[what]} after"
    end
    expect(after["os_threads"]).to be <= before["os_threads"] + 1 # + Ruby's thread cache
  end

  it "leak no fd, no Ruby thread and no native thread while another producer stays open" do
    expect(outcome).to be_success, outcome.describe
    expect(outcome["churn_with_one_more"]["fds"]).to be > outcome["churn_before"]["fds"]
    expect(outcome["churn_with_one_more"]["rdk_threads"]).to be > outcome["churn_before"]["rdk_threads"]
    expect_no_leak(outcome["churn_before"], outcome["churn_after"])
    expect(outcome["keeper_delivers"]).to be(true)
    expect(outcome["churn_poller"]).to eq(outcome["mode"] == "fd" ? [true, 1] : [false, 0])
  end

  it "leak nothing when every cycle closes the last producer, and leave no polling thread behind" do
    expect(outcome).to be_success, outcome.describe
    expect_no_leak(outcome["restart_before"], outcome["restart_after"])
    expect(outcome["restart_poller"]).to eq([false, 0])
    expect(outcome["sluice_threads"]).to eq([])
  end
end
