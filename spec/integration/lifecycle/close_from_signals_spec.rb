# frozen_string_literal: true

# Producer#close from the places production code closes from: a signal
# handler (Signal.trap, Puma's after_stopped hook), at_exit, a finalizer, and
# the process teardown after at_exit, when the poller thread is already gone.
# Each scenario runs in its own process (a close that deadlocks or raises
# there must not wedge the suite); all of them start at once.
RSpec.describe "Closing a producer from signal handlers, at_exit and finalizers", :kafka do
  include PollingScenarios

  before(:context) do
    names = %i[trap trap_while_producing at_exit finalizer teardown other_thread]
    @scenarios = start_scenarios(**names.to_h { |name| [name, scenario_file("lifecycle/close_from_signals/#{name}")] })
  end

  def outcome(name)
    scenario_outcome(@scenarios, name).tap { |o| expect(o).to be_success, o.describe }
  end

  it "closes from a signal handler (no ThreadError), delivering what was queued" do
    expect(outcome(:trap).data).to eq("closed" => true, "delivered" => 20)
  end

  it "closes from a signal handler that interrupts a producing thread, which then gets ProducerClosedError" do
    r = outcome(:trap_while_producing)
    expect(r["closed"]).to be(true)
    expect(r["refused"]).to eq("Sluice::Errors::ProducerClosedError")
    expect(r["accepted"]).to be > 0
    expect(r["delivered"]).to eq(r["accepted"])
  end

  it "closes from an at_exit hook" do
    expect(outcome(:at_exit).data).to eq("closed" => true, "delivered" => 10)
  end

  it "closes from a finalizer" do
    expect(outcome(:finalizer).data).to eq("closed" => true, "delivered" => true)
  end

  it "closes during process teardown, when the polling thread is already gone" do
    expect(outcome(:teardown).data).to eq("closed" => true, "delivered" => true)
  end

  it "closes from another thread while one waits in produce_sync, which still gets its report" do
    expect(outcome(:other_thread).data).to eq("closed" => true, "waiter_delivered" => true)
  end
end
