# frozen_string_literal: true

module Sluice
  class Consumer
    # Workers' workers as fibers of the calling fiber's scheduler
    # (Fiber.schedule), in the reader's thread: each_message(concurrency:)
    # called from a non-blocking fiber under a Fiber.scheduler. Under Async,
    # each is a child task of the reader's task.
    #
    # Ruby 3.1 has no Fiber#kill. #stop raises Workers::Stop into each worker
    # still alive, at the wait where it is suspended (a running block's IO,
    # sleep, Queue or Mutex; an idle worker's wait for a message), so its
    # ensure clauses run as a killed thread's do; then waits, bounded as
    # ThreadPool's join, for all to end. The exception goes
    # - through the scheduler's own #raise(fiber, exception) when it has one
    #   (Async 2 and io-event's schedulers): they switch fibers with
    #   Fiber#transfer, where a bare Fiber#raise would transfer into the
    #   worker and never come back to the reader;
    # - else by Fiber#raise, which resumes the worker until it ends or waits
    #   again, then returns to the reader: right for schedulers that suspend
    #   fibers with Fiber.yield (Async 1.x). A scheduler that switches with
    #   Fiber#transfer and has no #raise is not supported.
    # A worker that cannot take it (FiberError: it is resuming a fiber of its
    # own) ends after its block returns, as no block starts after #stop.
    class FiberPool
      include Shared::Clock

      # Starts count fibers, each running the block (Workers' loop).
      def initialize(count, &serve)
        @scheduler = Fiber.scheduler
        @lock = Mutex.new
        @ended = ConditionVariable.new
        @alive = count
        @fibers = Array.new(count) { Fiber.schedule { run(serve) } }
      end

      # @return [Boolean] the caller runs in one of the pool's fibers (inside a block)
      def current? = @fibers.include?(Fiber.current)

      # The caller's worker, as Workers keys what each runs.
      def worker = Fiber.current

      # Raises Workers::Stop into every fiber still alive, then waits at most
      # seconds for them to end: a block's ensure may wait for ever.
      def stop(seconds)
        @fibers.each { |fiber| interrupt(fiber) }
        deadline = now + seconds
        @lock.synchronize do
          while @alive.positive?
            left = deadline - now
            break unless left.positive?

            Shared::Blocking.wait(@ended, @lock, left)
          end
        end
      end

      private

      def run(serve)
        serve.call
      rescue Workers::Stop
        nil # its message (if it ran one) stays lent: handed out again
      ensure
        @lock.synchronize do
          @alive -= 1
          @ended.broadcast
        end
      end

      def interrupt(fiber)
        return unless fiber.alive?

        @scheduler.respond_to?(:raise) ? @scheduler.raise(fiber, Workers::Stop) : fiber.raise(Workers::Stop)
      rescue FiberError, Workers::Stop
        # The fiber is resuming ours (its block stopped the reader's task): it
        # ends when its block returns. Ruby 3.1 refuses with FiberError; Ruby
        # 3.3 raises the Stop here, in the calling fiber, instead.
        nil
      end
    end
  end
end
