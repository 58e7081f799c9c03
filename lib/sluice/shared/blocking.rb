# frozen_string_literal: true

module Sluice
  module Shared
    # Blocking native calls (flush, transactions, metadata, destroy) in a way a
    # Fiber scheduler can see, the contexts where Ruby forbids waiting, and a
    # ConditionVariable wait that an exception leaves with its mutex locked.
    #
    # A native call releases the GVL, so other threads run, but the fibers of the
    # calling thread cannot: a scheduler only switches fibers at the waits it
    # hooks (IO, sleep, Mutex, Queue, Thread#join). Under a scheduler such a call
    # runs on a short-lived thread while the fiber waits on Thread#value.
    module Blocking
      module_function

      # Runs the block, on a helper thread when a non-blocking fiber is current.
      # @param interruptible [Boolean] if the waiting fiber is interrupted, cut
      #   the call short too (its unblock function ends it); false lets it
      #   finish first (transaction calls), then the interrupt goes on.
      def call(interruptible: true, &block)
        return yield unless fiber_scheduled?

        # A new thread inherits the caller's Thread.handle_interrupt masks: the
        # worker must stay killable whatever the caller masks.
        caller = Thread.current
        worker = Thread.new do
          Thread.current[:sluice_caller] = caller # a closing consumer serves its closer's helpers too (consumer.c)
          Thread.handle_interrupt(Object => :immediate, &block)
        end
        worker.name = "sluice.blocking"
        worker.report_on_exception = false
        begin
          worker.value
        ensure
          settle(worker, interruptible) if worker.alive?
        end
      end

      # The caller was interrupted: the worker is cut short (interruptible) or
      # finishes, and the caller waits for it. A second Fiber#raise (Async's
      # Task#stop again) landing in that wait is dropped, not let out before
      # the worker ended: Thread.handle_interrupt does not hold one back, and a
      # call left running would finish after its caller moved on (a commit
      # noted as done after the next transaction began).
      def settle(worker, interruptible)
        worker.kill if interruptible
        worker.join
      rescue Exception # rubocop:disable Lint/RescueException -- the first interrupt is on its way already
        retry if worker.alive?
      end

      def fiber_scheduled? = !Fiber.scheduler.nil? && !Fiber.current.blocking?

      # condition.wait(mutex, seconds), the mutex locked again however it ends.
      # Under a fiber scheduler, Ruby 3.1 does not lock it again when an
      # exception ends the wait (Async's Task#stop, Fiber#raise): the
      # enclosing Mutex#synchronize's unlock then raised a ThreadError in the
      # exception's place ("Attempt to unlock a mutex which is not locked").
      def wait(condition, mutex, seconds = nil)
        condition.wait(mutex, seconds)
      ensure
        mutex.lock unless mutex.owned?
      end

      # True inside a signal handler (Signal.trap), where Mutex#lock raises
      # ThreadError. Ruby offers no other way to tell.
      def trap_context?
        Mutex.new.synchronize { false }
      rescue ThreadError
        true
      end
    end
  end
end
