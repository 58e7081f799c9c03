# frozen_string_literal: true

# Producer#close from the places production code closes from: a signal
# handler (Signal.trap, Puma's after_stopped hook), at_exit, a finalizer, and
# the process teardown after at_exit, when the poller thread is already gone.
# Each scenario runs in its own process (a close that deadlocks or raises
# there must not wedge the suite); all of them start at once.
RSpec.describe "Closing a producer from signal handlers, at_exit and finalizers", :kafka do
  include PollingScenarios

  before(:context) do
    @scenarios = start_scenarios(
      # The handler runs on the main thread while it waits in Queue#pop.
      trap: <<~'RUBY',
        producer = make_producer(kafka: { "linger.ms": 200 })
        producer.produce_sync(topic: "sluice-spec-1p", payload: "warm-up")
        handles = Array.new(20) { |i| producer.produce_async(topic: "sluice-spec-1p", payload: "trap #{i}") }
        outcome = Queue.new
        trap("TERM") do
          producer.close
          outcome << { "closed" => producer.closed? }
        rescue Exception => e # rubocop:disable Lint/RescueException
          outcome << { "error" => "#{e.class}: #{e.message}" }
        end
        Process.kill("TERM", Process.pid)
        r = outcome.pop
        r["delivered"] = handles.count { |h| !h.pending? && h.error.nil? }
        result(r)
      RUBY

      # The handler interrupts a thread that is producing as fast as it can:
      # neither side may deadlock, and what was accepted is delivered.
      trap_while_producing: <<~'RUBY',
        producer = make_producer
        producer.produce_sync(topic: "sluice-spec-many", payload: "warm-up")
        outcome = Queue.new
        trap("TERM") do
          producer.close
          outcome << producer.closed?
        rescue Exception => e # rubocop:disable Lint/RescueException
          outcome << "#{e.class}: #{e.message}"
        end
        handles = []
        refused = nil
        killer = Thread.new { sleep 0.05; Process.kill("TERM", Process.pid) }
        begin
          loop { handles << producer.produce_async(topic: "sluice-spec-many", payload: "busy #{handles.size}") }
        rescue Sluice::Errors::ProducerClosedError => e
          refused = e.class.name
        end
        killer.join
        result("closed" => outcome.pop, "refused" => refused, "accepted" => handles.size,
               "delivered" => handles.count { |h| !h.pending? && h.error.nil? })
      RUBY

      at_exit: <<~'RUBY',
        producer = make_producer(kafka: { "linger.ms": 300 })
        handles = Array.new(10) { |i| producer.produce_async(topic: "sluice-spec-1p", payload: "at_exit #{i}") }
        at_exit do
          producer.close
          result("closed" => producer.closed?, "delivered" => handles.count { |h| !h.pending? && h.error.nil? })
        end
      RUBY

      # A finalizer runs wherever the GC decides, between two Ruby instructions.
      finalizer: <<~'RUBY',
        producer = make_producer(kafka: { "linger.ms": 200 })
        handle = producer.produce_async(topic: "sluice-spec-1p", payload: "finalizer")
        outcome = Queue.new
        ObjectSpace.define_finalizer(Object.new, proc do
          producer.close
          outcome << { "closed" => producer.closed?, "delivered" => !handle.pending? && handle.error.nil? }
        rescue Exception => e # rubocop:disable Lint/RescueException
          outcome << { "error" => "#{e.class}: #{e.message}" }
        end)
        GC.start until outcome.size.positive?
        result(outcome.pop)
      RUBY

      # After at_exit, Ruby kills every other thread, then runs finalizers: the
      # poller thread is gone by then, so close must serve its own queue.
      teardown: <<~'RUBY',
        producer = make_producer(kafka: { "linger.ms": 300 })
        handle = producer.produce_async(topic: "sluice-spec-1p", payload: "teardown")
        Sluice::Shutdown.untrack(producer) # as if the exit hook had not got to it
        ObjectSpace.define_finalizer(Object.new, proc do
          producer.close
          result("closed" => producer.closed?, "delivered" => !handle.pending? && handle.error.nil?)
        end)
      RUBY

      # Another thread closes while this one is blocked in produce_sync.
      other_thread: <<~'RUBY'
        producer = make_producer(kafka: { "linger.ms": 300 })
        producer.produce_sync(topic: "sluice-spec-1p", payload: "warm-up")
        waiting = Thread.new { producer.produce_sync(topic: "sluice-spec-1p", payload: "waits") }
        Thread.pass until waiting.status == "sleep"
        producer.close
        report = waiting.value
        result("closed" => producer.closed?, "waiter_delivered" => report.error.nil?)
      RUBY
    )
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
