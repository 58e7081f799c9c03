# frozen_string_literal: true

# Scenarios that can wedge a process run in their own, in parallel.
RSpec.describe "Scenarios in their own process", :kafka, timeout: 120 do
  SCENARIOS = {
    close_from_own_callback: <<~RUBY,
      $stdout.sync = true
      done = Queue.new
      producer = Sluice::Producer.new { |c| c.kafka = { "bootstrap.servers": BROKERS }; c.polling.mode = MODE }
      other = Sluice::Producer.new { |c| c.kafka = { "bootstrap.servers": BROKERS }; c.polling.mode = MODE }
      producer.monitor.subscribe("message.acknowledged") { other.close; producer.close; done << :returned }
      handle = producer.produce_async(topic: "sluice-spec-1p", payload: "x")
      puts [done.pop, producer.closed?, other.closed?, handle.wait.error.nil?].inspect
    RUBY
    fork: <<~RUBY,
      $stdout.sync = true
      parent = Sluice::Producer.new { |c| c.kafka = { "bootstrap.servers": BROKERS }; c.polling.mode = MODE }
      parent.produce_sync(topic: "sluice-spec-1p", payload: "parent")
      reader, writer = IO.pipe
      pid = fork do
        reader.close
        inherited = begin
          parent.produce_async(topic: "sluice-spec-1p", payload: "x")
          "no error"
        rescue Sluice::Errors::ForkedProcessError => e
          e.message
        end
        child = Sluice::Producer.new { |c| c.kafka = { "bootstrap.servers": BROKERS }; c.polling.mode = MODE }
        ok = child.produce_sync(topic: "sluice-spec-1p", payload: "child").error.nil?
        count = Sluice::Polling::Poller.instance.count
        child.close
        writer.puts [inherited, ok, count].inspect
        writer.close
        exit!(0)
      end
      writer.close
      from_child = reader.read
      Process.wait(pid)
      puts [from_child.strip, $?.exitstatus, parent.produce_sync(topic: "sluice-spec-1p", payload: "after").error.nil?].inspect
      parent.close
    RUBY
    fiber_scheduler: <<~RUBY
      require "async"
      $stdout.sync = true
      producer = Sluice::Producer.new { |c| c.kafka = { "bootstrap.servers": BROKERS, "linger.ms": 200 }; c.polling.mode = MODE }
      producer.produce_sync(topic: "sluice-spec-1p", payload: "warm")
      ticks = 0
      results = []
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      Async do |task|
        ticker = task.async { loop { ticks += 1; sleep 0.005 } }
        20.times.map { |i| task.async { results << producer.produce_sync(topic: "sluice-spec-1p", payload: i.to_s).error } }.each(&:wait)
        ticker.stop
      end
      elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
      producer.close
      puts [results.size, results.compact.size, ticks, elapsed].inspect
    RUBY
  }.freeze

  before(:all) do
    @results = SCENARIOS.to_h { |name, code| [name, Thread.new { run_scenario(code) }] }.transform_values(&:value)
  end

  def result(name)
    out, status = @results.fetch(name)
    expect(status).to be_success, out
    eval(out.lines.last) # rubocop:disable Security/Eval
  end

  it "completes close called from the producer's own message.acknowledged callback" do
    expect(result(:close_from_own_callback)).to eq([:returned, true, true, true])
  end

  it "refuses an inherited producer in a forked child; a new producer there works" do
    from_child, child_status, parent_still_works = result(:fork)
    inherited_error, child_delivered, child_poller_count = eval(from_child) # rubocop:disable Security/Eval

    expect(inherited_error).to match(/created in process \d+ and cannot be used in forked process \d+/)
    expect(child_delivered).to be(true)
    expect(child_poller_count).to eq(TestKafka::MODE == :fd ? 1 : 0)
    expect([child_status, parent_still_works]).to eq([0, true])
  end

  it "lets other fibers run while produce_sync waits under a fiber scheduler" do
    delivered, failed, ticks, elapsed = result(:fiber_scheduler)

    expect([delivered, failed]).to eq([20, 0])
    # linger.ms=200 holds each delivery ~200 ms: waits that blocked the thread would
    # take 20 x 200 ms one after the other; cooperative ones overlap, and the ticker runs meanwhile
    expect(elapsed).to be < 2.0
    expect(ticks).to be >= 20
  end
end
