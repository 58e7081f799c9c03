# frozen_string_literal: true

module Sluice
  class Consumer
    # The workers of a concurrent each_message: up to `count` blocks at once,
    # started in the order Lanes allows, and the messages taken and not yet
    # finished counted against a bound (messages and bytes). The workers are
    # threads of their own (ThreadPool), or fibers of the caller's scheduler
    # when the reader runs in a non-blocking fiber under a Fiber.scheduler
    # (FiberPool); the rest is the same for both: Mutex and ConditionVariable
    # wait for a fiber only, under a scheduler.
    #
    # Workers never touch the consumer: a finished message (or the error its
    # block raised) goes to #finished!, which the reader takes and applies to
    # the Inbox. So the Inbox keeps one reader, and a worker killed (or
    # stopped) anywhere leaves nothing half-moved (its message stays lent: it
    # is handed out again, and holds its partition's offset back meanwhile).
    class Workers
      # A block's end: error is nil when it returned.
      Finish = Struct.new(:message, :error)
      # How long (s) #stop waits for killed threads (or stopped fibers) to end.
      KILL_WAIT = 1.0
      # What FiberPool#stop raises into a worker fiber: not an error of the
      # block's (it ends the worker), and an Exception, as Thread#kill is not
      # stopped by a block's `rescue => e`.
      class Stop < Exception; end # rubocop:disable Lint/InheritException -- see above
      # The reader waiting for room is woken once this share of the workers
      # ended blocks (at most WAKE_BATCH_MAX), not on every end: at
      # concurrency 256 each wake-up waits for the GVL behind the workers
      # (issue 58, item 5), and a batch of room is as good as one.
      WAKE_BATCH_SHARE = 16
      # The largest batch of ends the reader is woken for.
      WAKE_BATCH_MAX = 16

      # @param stopped [#call] true once the read was stopped: nothing starts then
      # @param cutoff [#call] when #settle stops waiting whatever its seconds (a Shared::Clock#now value; nil: never)
      def initialize(count:, ordering:, block:, stopped:, cutoff: -> {})
        @lanes = Lanes.new(ordering)
        @block = block
        @read_stopped = stopped
        @cutoff = cutoff
        @lock = Mutex.new
        @work = ConditionVariable.new # a worker waits for a message it may start
        @change = ConditionVariable.new # the reader waits for a block to end
        @finished = []
        @held = false # no block starts (an error, a revocation, the end of the read)
        @running = 0
        @blocks = {} # worker => the message its block runs
        @size = 0 # taken, not finished: waiting or running
        @bytes = 0
        @batch = (count / WAKE_BATCH_SHARE).clamp(1, WAKE_BATCH_MAX)
        @pool = (Shared::Blocking.fiber_scheduled? ? FiberPool : ThreadPool).new(count) { serve }
      end

      # Taken and not finished: how many, and their keys' and payloads' bytes.
      attr_reader :size, :bytes

      # Blocks running now.
      def running = @lock.synchronize { @running }

      # What the read holds now: blocks running (less those retrying),
      # messages waiting for a worker, and retrying (Failure::Policy#retrying,
      # which run inside blocks). Read without the lock, from another thread
      # (statistics) while blocks run: each counter is read whole, the two
      # maybe a change apart, so none goes below 0.
      # @return [Hash{Symbol => Integer}] running:, waiting:, retrying:
      def in_flight(retrying)
        running = @running
        size = @size
        retrying = retrying.clamp(0, running)
        { running: running - retrying, waiting: [size - running, 0].max, retrying: retrying }
      end

      # @return [Boolean] the caller is one of the workers: inside a block
      def current? = @pool.current?

      # The lowest offset below `offset` of this partition's messages taken
      # and not finished (waiting, or running in another block than the
      # caller's), or nil.
      def unfinished_below(topic, partition, offset)
        own = @pool.worker
        @lock.synchronize do
          running = @blocks.filter_map { |worker, m| m.offset if !worker.equal?(own) && m.partition == partition && m.topic == topic }
          [@lanes.lowest_waiting(topic, partition), *running].compact.select { |unfinished| unfinished < offset }.min
        end
      end

      # Messages of this partition taken and not started.
      def waiting_in(topic, partition) = @lock.synchronize { @lanes.waiting_in(topic, partition) }

      # Queues a message (taken by the reader) for a worker.
      def add(message)
        @lock.synchronize do
          @lanes.add(message)
          @size += 1
          @bytes += bytes_of(message)
          @work.signal unless @held
        end
      end

      # What ended since the last call, in the order it ended.
      # @return [Array<Finish>]
      def finished! = @lock.synchronize { @finished.slice!(0..) }

      # Waits (at most seconds) until a block ends, unless one already did.
      def wait_for_finish(seconds)
        @lock.synchronize { Shared::Blocking.wait(@change, @lock, seconds) if @finished.empty? }
      end

      # No block starts until #release; those running go on.
      def hold = @lock.synchronize { @held = true }

      # Blocks start again (after #hold).
      def release
        @lock.synchronize do
          @held = false
          @work.broadcast
        end
      end

      # Waits (at most seconds, and not past the cutoff) for every running
      # block to end; holds first.
      # @return [Boolean] none runs
      def settle(seconds)
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
        @lock.synchronize do
          @held = true
          while @running.positive?
            left = [deadline, @cutoff.call].compact.min - Process.clock_gettime(Process::CLOCK_MONOTONIC)
            return false unless left.positive?

            Shared::Blocking.wait(@change, @lock, left)
          end
        end
        true
      end

      # The cutoff moved (a close began): a #settle under way waits for it.
      # A signal handler may not lock: its wake-up may come before the wait.
      def wake
        return @change.broadcast if Shared::Blocking.trap_context?

        @lock.synchronize { @change.broadcast }
      end

      # Messages not started on these partitions are forgotten (revoked).
      def drop(partitions)
        @lock.synchronize do
          @lanes.drop(partitions).each { |message| forget(message) }
        end
      end

      # Ends every worker: waiting ones at once; running ones killed (a
      # thread: Thread#kill) or stopped (a fiber: Stop raised where it waits;
      # see FiberPool), their blocks interrupted as Timeout would interrupt
      # them, and waits for them to end, at most seconds: a block's ensure may not return.
      def stop(seconds = KILL_WAIT)
        @lock.synchronize do
          @stopping = true
          @work.broadcast
        end
        @pool.stop(seconds)
      end

      private

      # A worker ends its block and takes the next message in one lock, and
      # wakes no other worker for work it takes itself: on threads each lock
      # and wake-up may wait for the GVL behind every other worker.
      def serve
        message = @lock.synchronize { next_message }
        while message
          error = run(message)
          message = @lock.synchronize { ended(message, error) || next_message }
        end
      end

      # @return [Exception, nil] what the block raised; Stop is not the block's: it ends the worker
      def run(message)
        @block.call(message)
        nil
      rescue Stop
        raise
      rescue Exception => e # rubocop:disable Lint/RescueException -- handed to the reader, which re-raises it
        e
      end

      # Under the lock. A worker with nothing to start wakes the reader before
      # it waits: what finished makes room for more.
      def next_message
        loop do
          return if @stopping

          message = @lanes.start unless @held || @read_stopped.call
          if message
            @running += 1
            @blocks[@pool.worker] = message
            return message
          end
          @change.broadcast unless @finished.empty?
          Shared::Blocking.wait(@work, @lock)
        end
      end

      # Under the lock; nil. After an error nothing else starts: the read
      # stops, as it does with one block at a time. The reader is woken for a
      # batch of ends (its hand-outs come in batches too), or when it may wait
      # for this one (#settle holds; the last block ended); a worker left idle
      # wakes it too (#next_message).
      def ended(message, error)
        @running -= 1
        @blocks.delete(@pool.worker)
        @lanes.finished(message)
        forget(message)
        @held = true if error
        @finished << Finish.new(message, error)
        @change.broadcast if @held || @running.zero? || @finished.size >= @batch
        nil
      end

      def forget(message)
        @size -= 1
        @bytes -= bytes_of(message)
      end

      def bytes_of(message) = message.payload.to_s.bytesize + message.key.to_s.bytesize
    end
  end
end
