# frozen_string_literal: true

# Forked children: a producer (and a poller) created by the parent belongs to
# the parent. Each scenario forks inside its own process; the child reports
# back through a pipe (JSON) and its exit status.
RSpec.describe "Producers and forked processes", :kafka do
  include PollingScenarios

  before(:context) do
    inherited = <<~'RUBY'
      parent = make_producer
      parent.produce_sync(topic: "sluice-spec-1p", payload: "parent, before fork")
      parent_poller = Sluice::Polling::Poller.instance
      child, status = in_child do
        c = { "pid" => Process.pid }
        c["produce_sync"] = forked_error { parent.produce_sync(topic: "sluice-spec-1p", payload: "child via parent") }
        c["produce_async"] = forked_error { parent.produce_async(topic: "sluice-spec-1p", payload: "child via parent") }
        c["flush"] = forked_error { parent.flush(1_000) }
        c["threads_at_start"] = sluice_thread_names
        poller = Sluice::Polling::Poller.instance
        c["fresh_poller"] = !poller.equal?(parent_poller)
        c["poller_at_start"] = [poller.id, poller.count, poller.alive?]
        own = make_producer
        c["poller_with_own"] = [poller.count, poller.alive?]
        c["threads_with_own"] = sluice_thread_names
        c["own_delivers"] = own.produce_sync(topic: "sluice-spec-1p", payload: "child's own").error.nil?
        own.close
        c["poller_after_own"] = [poller.count, poller.alive?]
        parent.close # only forgets the parent's handle
        c["inherited_closed"] = parent.closed?
        c
      end
      result(
        "parent_pid" => Process.pid, "child" => child, "child_exit" => status.exitstatus,
        "parent_works" => parent.produce_sync(topic: "sluice-spec-1p", payload: "parent, after fork").error.nil?,
        "parent_poller" => [parent_poller.equal?(Sluice::Polling::Poller.instance), parent_poller.count, parent_poller.alive?],
        "mode" => MODE
      )
      parent.close
    RUBY
    dedicated = <<~'RUBY'
      dedicated = Sluice::Polling::Poller.new
      parent = make_producer(mode: :fd) { |config| config.polling.poller = dedicated }
      parent.produce_sync(topic: "sluice-spec-1p", payload: "parent on a dedicated poller")
      child, status = in_child do
        c = { "before" => [dedicated.count, dedicated.alive?] }
        own = make_producer(mode: :fd) { |config| config.polling.poller = dedicated }
        c["with_own"] = [dedicated.count, dedicated.alive?]
        c["threads_with_own"] = sluice_thread_names
        c["own_delivers"] = own.produce_sync(topic: "sluice-spec-1p", payload: "child on the inherited poller").error.nil?
        own.close
        c["after_own"] = [dedicated.count, dedicated.alive?]
        c
      end
      result(
        "id" => dedicated.id, "child" => child, "child_exit" => status.exitstatus,
        "parent_works" => parent.produce_sync(topic: "sluice-spec-1p", payload: "parent, after fork").error.nil?,
        "parent_poller" => [dedicated.count, dedicated.alive?]
      )
      parent.close
    RUBY
    # A consumer read by a parent thread at fork time: that reader does not
    # exist in the child, whose calls and exit must not wait for it (issue 26).
    consumer = <<~'RUBY'
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
    RUBY
    scenarios = { inherited: inherited, consumer: consumer }
    scenarios[:dedicated] = dedicated if TestKafka::MODE == :fd # an :fd-only example
    @scenarios = start_scenarios(timeout: 40, **scenarios.transform_values { |code| PollingScenarios::FORK_HELPERS + code })
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
