# frozen_string_literal: true

# Producer#close called by a listener, i.e. on the thread that polls the
# producer (the shared poller in :fd mode, the producer's own thread in
# :thread mode). Each scenario runs in its own process — a close that
# deadlocks there would wedge the suite — and all of them run in parallel.
RSpec.describe "Closing a producer from one of its callbacks", :kafka do
  include PollingScenarios

  before(:context) do
    names = %i[own other replace concurrent fd_bookkeeping]
    scenarios = names.to_h { |name| [name, scenario_file("lifecycle/close_from_callback/#{name}")] }
    scenarios.delete(:fd_bookkeeping) unless TestKafka::MODE == :fd # an :fd-only example
    @scenarios = start_scenarios(**scenarios)
  end

  def outcome(name) = scenario_outcome(@scenarios, name)

  def polling_thread_name
    TestKafka::MODE == :fd ? "sluice.poller#0" : a_string_starting_with("sluice.producer#")
  end

  it "completes close called from the producer's own message.acknowledged listener" do
    own = outcome(:own)

    expect(own).to be_success, own.describe # the process exited 0: nothing wedged
    expect(own.data).to include("returned" => true, "closed_inside" => true, "thread" => polling_thread_name)
    expect(own["closed_main"]).to be(true)
    expect(own["handles"]).to eq([true] * 5) # close flushed the messages still in flight
    expect(own["refuses"]).to eq("Sluice::Errors::ProducerClosedError")
    expect(own["bystander"]).to be(true) # the polling thread goes on serving the others
  end

  it "completes close of ANOTHER producer (on the same poller in :fd mode) called from a listener" do
    other = outcome(:other)

    expect(other).to be_success, other.describe
    expect(other.data).to include("returned" => true, "b_closed" => true, "thread" => polling_thread_name)
    expect(other["b_closed_main"]).to be(true)
    expect(other["lingering_pending_after_close"]).to be(false) # close waited for B's lingering message
    expect(other["lingering_ok"]).to be(true)
    expect(other["a_still_works"]).to be(true)
  end

  # A regression (fixed in da71e67): the poller thread that was stopping registered the new producer,
  # and no thread served it.
  it "serves a producer created by the listener that closed the last producer, at once" do
    replace = outcome(:replace)

    expect(replace).to be_success, replace.describe
    expect(replace["old_closed"]).to be(true)
    expect(replace["replacement"]).to be(true)
    expect(replace["after_all"]).to eq([false, 0])
  end

  # A regression (fixed in da71e67): a close on the polling thread waited for the other close, which
  # waited for the polling thread (a deadlock).
  it "completes when the application and a listener close the producer at the same time" do
    concurrent = outcome(:concurrent)

    expect(concurrent).to be_success, concurrent.describe
    expect(concurrent.data).to eq("app_close_returned" => true, "listener_close_returned" => true, "closed" => true)
  end

  it "keeps the global poller's count exact when its producers close on the poller thread (:fd)",
     skip: (TestKafka::MODE != :fd && "an :fd-only example: runs in the :fd pass") do
    fd = outcome(:fd_bookkeeping)

    expect(fd).to be_success, fd.describe
    expect(fd["thread"]).to eq("sluice.poller#0")
    expect(fd["count_in_callback"]).to eq(0)
    expect(fd["count_after"]).to eq(0)
    expect(fd["count_with_new"]).to eq(1)
    expect(fd["new_delivers"]).to be(true)
    expect(fd["alive_with_new"]).to be(true)
    expect(fd["final"]).to eq([false, 0])
  end

  it "leaves the global poller idle (:fd) once every producer is closed",
     skip: (TestKafka::MODE != :fd && "an :fd-only example: runs in the :fd pass") do
    expect([outcome(:own)["after_all"], outcome(:other)["after_all"]]).to eq([[false, 0], [false, 0]])
    expect([outcome(:own)["count_with_bystander"], outcome(:other)["count_with_a"]]).to eq([1, 1])
  end
end
