# frozen_string_literal: true

# Forked children: a producer (and a poller) created by the parent belongs to
# the parent. Each scenario forks inside its own process; the child reports
# back through a pipe (JSON) and its exit status.
RSpec.describe "Producers and forked processes", :kafka do
  include PollingScenarios

  # The scenarios are in spec/support/scenarios/fork/: inherited (the parent's producer and poller in the
  # child), dedicated (a dedicated poller in the child) and consumer (a consumer read by a parent thread at
  # fork time: that reader does not exist in the child, whose calls and exit must not wait for it; issue 26).
  before(:context) do
    names = %i[inherited consumer]
    names << :dedicated if TestKafka::MODE == :fd # an :fd-only example
    @scenarios = start_scenarios(timeout: 40, **names.to_h { |name| [name, scenario_file("fork/#{name}")] })
  end

  describe "a consumer read by a parent thread, inherited by a forked child" do
    let(:outcome) { scenario_outcome(@scenarios, :consumer) }

    it "raises ForkedProcessError from the child's reads, never waiting for the parent's reader" do
      child = outcome["child"]
      expect(child["poll"]).to include("class" => "Sluice::Errors::ForkedProcessError")
      expect(child["each_message"]).to include("class" => "Sluice::Errors::ForkedProcessError")
    end

    it "lets the child close it and exit at once (at exit too), while the parent reads on" do
      expect(outcome["child"]).to include("closed" => true)
      # At once: ~0.01 s; half of the wait leaves room for a loaded machine.
      guards = "max_wait_timeout (10 s), waiting for the parent's reader"
      expect_elapsed(outcome["child"]["close_seconds"], within: 5, guards: guards)
      expect(outcome["child_exit"]).to eq(0)
      expect(outcome["at_exit_child_exit"]).to eq(0)
      expect_elapsed(outcome["at_exit_child_seconds"], within: 5, guards: guards)
      expect(outcome["parent_reads"]).to be(true)
    end
  end

  describe "a producer created in the parent and used in a forked child" do
    let(:outcome) { scenario_outcome(@scenarios, :inherited) }
    let(:child) { outcome["child"] }

    it "raises ForkedProcessError (a ProducerClosedError) naming both processes and the remedy" do
      expect(outcome).to be_success, outcome.describe
      expect(child).not_to have_key("child_error")
      expected_message = "this producer was created in process #{outcome["parent_pid"]} and cannot be used in " \
                         "forked process #{child["pid"]}; create a new producer in the child"
      %w[produce_sync produce_async flush].each do |call|
        expect(child[call]).to eq("class" => "Sluice::Errors::ForkedProcessError", "closed_error" => true,
                                  "message" => expected_message), "#{call}: #{child[call].inspect}"
      end
      expect(child["inherited_closed"]).to be(true) # close in the child just lets go of it
    end

    it "keeps working in the parent after the child used it and exited" do
      expect(outcome).to be_success, outcome.describe
      expect(outcome["child_exit"]).to eq(0)
      expect(outcome["parent_works"]).to be(true)
      if outcome["mode"] == "fd"
        expect(outcome["parent_poller"]).to eq([true, 1, true]) # the parent's poller is untouched
      end
    end

    it "lets the child create a producer of its own, which delivers" do
      expect(outcome).to be_success, outcome.describe
      expect(child).not_to have_key("child_error")
      expect(child["threads_at_start"]).to eq([]) # threads do not survive fork
      expect(child["own_delivers"]).to be(true)
    end

    it "gives the child a clean global poller (:fd)", skip: (TestKafka::MODE != :fd && "an :fd-only example: runs in the :fd pass") do
      expect(outcome).to be_success, outcome.describe
      expect(child["fresh_poller"]).to be(true)
      expect(child["poller_at_start"]).to eq([0, 0, false])
      expect(child["poller_with_own"]).to eq([1, true])
      expect(child["threads_with_own"]).to eq(["sluice.poller#0"])
      expect(child["poller_after_own"]).to eq([0, false])
    end
  end

  describe "a dedicated poller inherited by a forked child (:fd)", skip: (TestKafka::MODE != :fd && "an :fd-only example: runs in the :fd pass") do
    let(:outcome) { scenario_outcome(@scenarios, :dedicated) }
    let(:child) { outcome["child"] }

    it "starts clean in the child and serves the child's producer, while the parent's copy goes on" do
      expect(outcome).to be_success, outcome.describe
      expect(child).not_to have_key("child_error")
      expect(child["with_own"]).to eq([1, true])
      expect(child["threads_with_own"]).to eq(["sluice.poller##{outcome["id"]}"])
      expect(child["own_delivers"]).to be(true)
      expect(child["after_own"]).to eq([0, false])
      expect(outcome["child_exit"]).to eq(0)
      expect(outcome["parent_works"]).to be(true)
      expect(outcome["parent_poller"]).to eq([1, true])
    end

    # A regression (fixed in da71e67): a poller inherited through fork reported the parent's producers.
    it "reports no producers in the child before the child registers one" do
      expect(outcome).to be_success, outcome.describe
      expect(child["before"]).to eq([0, false])
    end
  end
end
