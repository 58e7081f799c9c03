# frozen_string_literal: true

require "async" # Debian's ruby-async (1.30): Async::Scheduler is a Fiber.scheduler
require "English"

# each_message(concurrency: N) called from a fiber under a Fiber.scheduler
# (Async): the N workers are fibers of that scheduler in the calling thread
# (Consumer::FiberPool), under the order, offset and ending rules that
# parallel_spec.rb checks on threads, and the reader's waits suspend its
# fiber only. Every example checks that its blocks ran as fibers of the
# calling thread: on threads of their own, each fails. Synchronised on queues
# (a pop bounded by Async's with_timeout: Timeout's thread would raise into
# whichever fiber runs), never on time.
RSpec.describe "Consumer#each_message with concurrency under a fiber scheduler (async)", :kafka do
  include ParallelReads

  let(:injected) { Class.new(StandardError) }
  let(:caller_thread) { Thread.current }
  let(:where) { Queue.new } # [thread, fiber] of every block

  # Runs the example's reads in an Async reactor of the calling thread.
  def in_reactor(&)
    Async(&).wait # re-raises what failed inside
    expect(Fiber.scheduler).to be_nil # the reactor cleaned up after itself
  end

  def pop_in_time(queue, seconds = 20) = Async::Task.current.with_timeout(seconds) { queue.pop }

  def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # Called first in every block.
  def record_where = where << [Thread.current, Fiber.current]

  # Every block ran in the calling thread, on fibers of the scheduler other than the reader's.
  def expect_fibers_of_caller(reader_fiber, at_least:)
    places = Array.new(where.size) { where.pop }
    expect(places.map(&:first).uniq).to eq([caller_thread])
    fibers = places.map(&:last).uniq
    expect(fibers.size).to be >= at_least
    expect(fibers).not_to include(reader_fiber)
    expect(fibers.map(&:blocking?)).to all(be(false))
  end

  # The shared examples' read (spec/support/parallel_read_examples.rb): in a reactor, on its task's fiber.
  def read_concurrently
    in_reactor do
      @reader_fiber = Fiber.current
      yield
      nil # a task whose value is an exception raises it from #wait
    end
  end

  def wait_pop(queue, seconds = 20) = pop_in_time(queue, seconds)

  def expect_blocks_off_reader(at_least:)
    expect_fibers_of_caller(@reader_fiber, at_least: at_least)
    expect(Thread.list.map(&:name)).not_to include(/\Asluice\.consumer-worker/)
  end

  include_examples "concurrent reads on any kind of worker"

  # Async's Task#stop raises Async::Stop into the reader where it waits: in
  # Inbox#take (nothing more to take) or in Workers#wait_for_finish (the
  # bound is full: a ConditionVariable wait, which Ruby 3.1 left unlocked
  # after an exception). The running blocks are stopped (Workers::Stop where
  # they wait, their ensure clauses run) and nothing is stored past them.
  { "waiting for a message" => 32, "waiting at the bound" => 4 }.each do |waiting, max_buffered|
    it "stopping the reader's task (#{waiting}) stops running blocks and stores nothing past them" do
      consumer, first = reader_of(10)
      running = Queue.new
      ended = Queue.new
      reader_task = reader_fiber = nil
      in_reactor do |task|
        reader_task = task.async do
          reader_fiber = Fiber.current
          consumer.each_message(concurrency: 4, ordering: :none, max_buffered: max_buffered) do |message|
            record_where
            running << message.offset
            Queue.new.pop unless message.offset == first + 1 # only the second one finishes
          ensure
            ended << [message.offset, $ERROR_INFO.class]
          end
        end
        4.times { pop_in_time(running) }
        reader_task.stop
        reader_task.wait
      end
      expect(reader_task.status).to eq(:stopped) # Async::Stop went through, not a ThreadError in its place
      stopped = Array.new(ended.size) { ended.pop }.reject { |offset, _| offset == first + 1 }
      expect(stopped.map(&:last)).to all(eq(Sluice::Consumer::Workers::Stop))
      expect(stopped.size).to eq(running.size + 3) # every block left running was stopped
      expect_fibers_of_caller(reader_fiber, at_least: 3) # a worker that finished may take the next message
      consumer.close
      expect(committed_offset).to eq(first)
      expect(reread(2)).to eq([first, first + 1])
    end
  end

  # The reader's own fiber is then resuming (Task#stop resumes it): the
  # block cannot take Workers::Stop (FiberError), it ends on its own.
  it "a block stopping the reader's task ends on its own, the others are stopped" do
    consumer, first = reader_of(4)
    others_running = Queue.new
    outcomes = Queue.new
    reader_task = reader_fiber = nil
    in_reactor do |task|
      reader_task = task.async do
        reader_fiber = Fiber.current
        consumer.each_message(concurrency: 4, ordering: :none) do |message|
          record_where
          if message.offset == first
            3.times { pop_in_time(others_running) }
            reader_task.stop
          else
            others_running << message.offset
            Queue.new.pop
          end
          outcomes << [message.offset, :returned]
        rescue Exception => e # rubocop:disable Lint/RescueException -- what the stop raised, recorded
          outcomes << [message.offset, e.class]
          raise
        end
      end
      reader_task.wait
    end
    expect(reader_task.status).to eq(:stopped)
    expect(Array.new(outcomes.size) { outcomes.pop }.sort_by(&:first))
      .to eq([[first, :returned]] + (1..3).map { |i| [first + i, Sluice::Consumer::Workers::Stop] })
    expect_fibers_of_caller(reader_fiber, at_least: 4)
    consumer.close
    expect(committed_offset).to eq(first) # the block that returned was never handed to the reader's Ledger
  end

  it "a stopped block whose ensure waits holds the reader back for Workers::KILL_WAIT, not for ever" do
    consumer, first = reader_of(1)
    running = Queue.new
    ensure_gate = Queue.new
    ensure_state = :not_reached
    state_when_returned = nil
    reader_task = reader_fiber = nil
    in_reactor do |task|
      reader_task = task.async do
        reader_fiber = Fiber.current
        consumer.each_message(concurrency: 2, ordering: :none) do |message|
          record_where
          running << message.offset
          Queue.new.pop
        ensure
          ensure_state = :waiting
          ensure_gate.pop
          ensure_state = :done
        end
      end
      pop_in_time(running)
      reader_task.stop
      reader_task.wait
      state_when_returned = ensure_state
      ensure_gate << true
    end
    expect(state_when_returned).to eq(:waiting)
    expect_fibers_of_caller(reader_fiber, at_least: 1)
    consumer.close
    expect(committed_offset).to eq(first)
  end

  # A fiber records the time every 5 ms; while the blocks are held, the
  # reader waits, in Inbox#take (every message taken) or in
  # Workers#wait_for_finish (the bound is full). A wait that blocked the
  # thread (50 ms at a time) would leave the ticker a tick per 50 ms.
  { "for a message" => [4, 8], "at the bound" => [8, 4] }.each do |waiting, (count, max_buffered)|
    it "lets other fibers run while the reader waits #{waiting}" do
      consumer, = reader_of(count)
      started = Queue.new
      release = Queue.new
      ticks = []
      window = nil
      finished = 0
      reader_fiber = nil
      in_reactor do |task|
        ticker = task.async do
          loop do
            ticks << monotonic
            sleep 0.005
          end
        end
        task.async do
          4.times { pop_in_time(started) }
          from = monotonic
          sleep 0.3 # the window measured, not a synchronisation: the blocks wait for `release`
          window = [from, monotonic]
          count.times { release << true }
        end
        reader_fiber = Fiber.current
        consumer.each_message(concurrency: 4, ordering: :none, max_buffered: max_buffered) do
          record_where
          started << true
          pop_in_time(release)
          consumer.stop if (finished += 1) == count
        end
      ensure
        ticker&.stop
      end
      expect(finished).to eq(count)
      expect(ticks.count { |t| t > window.first && t < window.last }).to be >= 20 # of 60
      expect_fibers_of_caller(reader_fiber, at_least: 4)
    end
  end
end
