# frozen_string_literal: true

# Polling::RefreshThread without a broker: the work runs on a named thread of its own, once per kick
# (a kick during a run runs it again after), the thread is gone while idle, work that raised does not
# stop the next kick, and stop ends a run that would never end, waited for at most STOP_WAIT.
RSpec.describe Sluice::Polling::RefreshThread do
  include PollingScenarios

  let(:runs) { Queue.new }
  let(:release) { Queue.new }

  def refresher(&work) = described_class.new("sluice.oauthbearer#spec", &work)

  def wait_idle(thread) = spin_until(timeout: 5, what: "the refresh thread idle") { !thread.busy? }

  it "runs the work on its own named thread, and keeps no thread once done" do
    thread = refresher { runs << Thread.current }
    thread.kick
    ran_on = Timeout.timeout(5) { runs.pop }
    wait_idle(thread)

    expect(ran_on).not_to be(Thread.current)
    expect(ran_on.name).to eq("sluice.oauthbearer#spec")
    expect(ran_on.join(5)).to be(ran_on)
  end

  it "runs again after the run under way when kicked meanwhile" do
    thread = refresher do
      runs << :run
      release.pop
    end
    thread.kick
    Timeout.timeout(5) { runs.pop }
    thread.kick
    2.times { release << true }

    expect(Timeout.timeout(5) { runs.pop }).to eq(:run)
    wait_idle(thread)
  end

  it "starts again after work that raised" do
    calls = 0
    thread = refresher do
      calls += 1
      runs << calls
      raise "broken" if calls == 1
    end
    thread.kick
    Timeout.timeout(5) { runs.pop }
    wait_idle(thread)
    thread.kick

    expect(Timeout.timeout(5) { runs.pop }).to eq(2)
  end

  it "ends a run that never returns at stop, and runs nothing after" do
    thread = refresher do
      runs << Thread.current
      Queue.new.pop
    end
    thread.kick
    hung = Timeout.timeout(5) { runs.pop }
    thread.stop
    thread.join
    thread.kick

    expect(hung).not_to be_alive
    expect(thread).not_to be_busy
  end
end
