# frozen_string_literal: true

require "async" # Debian's ruby-async (1.30): Async::Scheduler is a Fiber.scheduler
require "English"
require "delegate"
require "sluice/testing"

# Consumer::FiberPool, the workers of a concurrent each_message under a fiber
# scheduler, and the ConditionVariable wait they and the reader use
# (Shared::Blocking.wait), without a broker. Synchronised on queues.
RSpec.describe Sluice::Consumer::FiberPool do
  # Async's scheduler plus the #raise(fiber, exception) of the schedulers
  # that switch fibers with Fiber#transfer (Async 2, io-event), recorded.
  let(:raising_scheduler_class) do
    Class.new(SimpleDelegator) do
      def raised = (@raised ||= [])

      def raise(fiber, exception)
        raised << fiber
        fiber.raise(exception)
      end
    end
  end

  it "runs its workers as fibers of the scheduler, in the calling thread; #stop raises Workers::Stop where they wait" do
    places = []
    ends = []
    Async do
      held = Queue.new
      pool = described_class.new(3) do
        places << [Thread.current, Fiber.current]
        held.pop
      ensure
        ends << $ERROR_INFO.class
      end
      pool.stop(1)
    end.wait
    expect(places.map(&:first).uniq).to eq([Thread.current])
    expect(places.map(&:last).uniq.size).to eq(3)
    expect(ends).to eq([Sluice::Consumer::Workers::Stop] * 3)
  end

  it "waits at most the seconds given for a worker whose ensure waits" do
    state = :running
    state_after_stop = nil
    Async do
      gate = Queue.new
      pool = described_class.new(1) do
        Queue.new.pop
      ensure
        state = :waiting
        gate.pop
        state = :done
      end
      pool.stop(0.05)
      state_after_stop = state
      gate << true
    end.wait
    expect(state_after_stop).to eq(:waiting)
    expect(state).to eq(:done)
  end

  it "raises through the scheduler's own #raise when it has one (it switches fibers with Fiber#transfer)" do
    fibers = []
    ended = 0
    raised = nil
    Async do
      scheduler = raising_scheduler_class.new(Fiber.scheduler)
      allow(Fiber).to receive(:scheduler).and_return(scheduler)
      pool = described_class.new(2) do
        fibers << Fiber.current
        Queue.new.pop
      ensure
        ended += 1
      end
      pool.stop(1)
      raised = scheduler.raised
    end.wait
    expect(raised).to match_array(fibers)
    expect(ended).to eq(2)
  end

  it "is what a concurrent read of Sluice::Testing::Consumer runs on under a scheduler" do
    consumer = Sluice::Testing::Consumer.new
    4.times { |i| consumer.feed(topic: "orders", payload: "m#{i}") }
    consumer.subscribe("orders")
    places = []
    Async do
      all_started = Queue.new
      consumer.each_message(concurrency: 4, ordering: :none) do
        places << [Thread.current, Fiber.current]
        4.times { all_started << true } if places.size == 4 # no block goes on until all 4 run at once
        all_started.pop
      end
    end.wait
    expect(places.map(&:first).uniq).to eq([Thread.current])
    expect(places.map(&:last).uniq.size).to eq(4)
  ensure
    consumer&.close
  end
end

RSpec.describe Sluice::Shared::Blocking, ".wait" do
  it "under a scheduler, leaves the mutex locked when an exception ends the wait (Ruby 3.1 did not)" do
    stopped = Class.new(Exception) # rubocop:disable Lint/InheritException -- as Async::Stop and Workers::Stop are
    mutex = Mutex.new
    outcome = nil
    Async do |task|
      waiter = task.async do
        mutex.synchronize { described_class.wait(ConditionVariable.new, mutex, 5) }
      rescue Exception => e # rubocop:disable Lint/RescueException -- the spec looks at what arrived
        outcome = [e.class, mutex.owned?]
      end
      waiter.fiber.raise(stopped)
    end.wait
    expect(outcome).to eq([stopped, false]) # the exception raised, not a ThreadError; synchronize unlocked
  end
end
