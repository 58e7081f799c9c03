# frozen_string_literal: true

module Sluice
  class Consumer
    # each_message(concurrency: N): the reader's side. The calling thread (or
    # fiber) stays the Inbox's only reader: it takes messages while the bound
    # allows, hands them to Workers (threads, or fibers of the caller's
    # scheduler), and applies what they finished to the Inbox
    # (Inbox#processed), whose Ledger stores a partition's offset only below
    # its lowest unfinished message.
    #
    # How a read ends, and what becomes of the blocks still running:
    # - #stop (or close): no block starts after it; running ones are waited for
    #   (at most finish_within) and their offsets stored; messages taken and
    #   not started stay lent, handed out again by the next read;
    # - a block raises: the same, then the messages not finished (that one,
    #   those not started) are rewound (their partitions go back to them) and
    #   the error is raised from each_message;
    # - a revocation: before it is answered, no block starts and running ones
    #   are waited for (at most finish_within), so their offsets are committed
    #   before the partitions go; messages of the revoked partitions not started
    #   are dropped, and a block that outlives the wait stores nothing;
    # - a close: as a stop, but running blocks are waited for only until half
    #   of the close's timeout is spent, and killed ones until three quarters,
    #   so the close commits what finished and leaves the group in the rest;
    # - an exception in the reader (Timeout, Thread#raise, Thread#kill,
    #   Async's Task#stop, a consumer error): running blocks are killed
    #   (threads) or stopped (fibers: FiberPool) and nothing more is stored:
    #   what was not finished is handed out again.
    class ParallelReading
      include Shared::Clock

      # Longest wait for a message (ms) before the reader looks at what finished.
      TAKE_WAIT = 50
      # Offsets of finished blocks are stored at least this often (s), not on every message.
      STORE_EVERY = 0.1
      # Share of a close's timeout (Shared::ClientLife#deadline) running blocks are
      # waited for; the rest commits what finished and leaves the group.
      BLOCKS_SHARE = 0.5
      # Share of it by which killed blocks (Workers#stop) are waited for.
      KILL_SHARE = 0.75
      # With auto commit, what was stored is also committed at most this often
      # (s), as often as it is stored, not only every auto.commit.interval.ms
      # (5 s by default): a crash reads again at most this much finished work
      # (what finished above a held message is in the metadata:
      # FinishedOffsets). Async, and only when something was stored: at most
      # 10 commits a second per member, while blocks finish. (4 SIGKILLs at
      # :key 64: 0.5 s left 4,789 duplicates of 20,000, 0.1 s 2,499.)
      COMMIT_EVERY = 0.1
      # #in_flight before the workers start.
      IDLE = { running: 0, waiting: 0, retrying: 0 }.freeze

      # @param rewind [#call] Consumer#rewind: partitions back to these messages
      # @param instrument [#call] Consumer#instrument
      # @param shares [PartitionShares] each partition's share of max_buffered
      # @param close_deadline [#call] (share) Shared::ClientLife#deadline: nil until a close began
      # @param commit [Boolean] commit what is stored every COMMIT_EVERY (auto commit)
      # @param retrying [#call] how many messages the failure policy retries (Failure::Policy#retrying)
      def initialize(inbox:, rewind:, instrument:, shares:, concurrency:, ordering:, max_buffered:, max_buffered_bytes:, finish_within:, block:,
                     close_deadline: ->(_share) {}, commit: false, retrying: -> { 0 })
        @inbox = inbox
        @retrying = retrying
        @close_deadline = close_deadline
        @rewind = rewind
        @shares = shares
        @instrument = instrument
        @max_buffered = max_buffered
        @max_buffered_bytes = max_buffered_bytes
        @finish_within = finish_within / 1000.0
        @work = { count: concurrency, ordering: ordering, block: block, stopped: inbox.method(:stopped?),
                  cutoff: -> { close_deadline.call(BLOCKS_SHARE) } }
        @failure = nil
        @stored_at = @committed_at = now
        @commit = commit
        @uncommitted = false
      end

      # Reads until #stop or a block's error; see the class comment for the end.
      # Runs inside the Inbox's read, this object its Inbox::Holder
      # (Inbox#reading): the Inbox knows the read only as that.
      # (The workers start here, once the read is ours: a refused read leaves none behind.)
      def run
        @workers = Workers.new(**@work)
        @inbox.track_finished(true)
        read
        wind_down
      ensure
        @inbox.track_finished(false)
        @workers&.stop(kill_wait)
        @shares.resume_all
      end

      # A close began: a wait for running blocks under way takes its deadline. Safe from a signal handler.
      def close_began = @workers&.wake

      # Consumer#in_flight: lock-free, from any thread (Workers#in_flight).
      def in_flight = @workers&.in_flight(@retrying.call) || IDLE

      # @return [Boolean] the caller runs one of the blocks (on a worker's thread or fiber)
      def in_block? = !!@workers&.current?

      # A block storing or committing an offset itself: refused past a message
      # of its partition that another block has not finished (or not started),
      # as the read's own stores are (Ledger#storable!): a crash after it
      # would skip that message. Anywhere else than in a block, or without
      # offsets (nil: a commit of what was stored), nothing.
      # @param offsets [Array<Array(String, Integer, Integer)>, nil] [topic, partition, offset to store]
      # @raise [Errors::OffsetPastUnfinishedError]
      def refuse_past_unfinished(offsets, action)
        return unless offsets && in_block?

        offsets.each do |topic, partition, offset|
          unfinished = @workers.unfinished_below(topic, partition, offset) or next

          raise Errors::OffsetPastUnfinishedError, "#{action} inside each_message(concurrency:) would store offset #{offset} of " \
                                                   "#{topic}/#{partition} past offset #{unfinished}, whose block has not finished: " \
                                                   "return from the block instead (each_message stores its offset once every " \
                                                   "lower one finished), or commit without offsets"
        end
      end

      # Inbox::Holder: a revocation is about to be answered.
      def before_revoke
        running = @workers.running
        @instrument.call("consumer.revoke_waiting", running: running) if running.positive?
        @workers.settle(@finish_within)
        apply_finished
      end

      # Inbox::Holder: a rebalance was answered; these partitions were given up.
      def after_rebalance(given_up)
        @workers.drop(given_up) unless given_up.empty?
        @shares.rebalanced(given_up)
        @workers.release unless @failure
      end

      private

      def read
        until @failure || @inbox.stopped?
          apply_finished
          unless room?
            @inbox.keepalive
            next @workers.wait_for_finish(TAKE_WAIT / 1000.0)
          end

          message = @inbox.take(TAKE_WAIT)
          @workers.add(message) if message && !@shares.take_back?(message, @workers.waiting_in(message.topic, message.partition))
        end
      end

      # How long (s) killed blocks are waited for: Workers::KILL_WAIT, less when a close's share ends first.
      def kill_wait
        limit = @close_deadline.call(KILL_SHARE)
        limit ? (limit - now).clamp(0, Workers::KILL_WAIT) : Workers::KILL_WAIT
      end

      # The bound: a message larger than the byte bound still goes when nothing else waits.
      def room?
        size = @workers.size
        size.zero? || (size < @max_buffered && @workers.bytes < @max_buffered_bytes)
      end

      def apply_finished
        @shares.resume_drained { |topic, partition| @workers.waiting_in(topic, partition) }
        @workers.finished!.each do |finish|
          if finish.error
            @failure ||= finish
          else
            @inbox.processed(finish.message)
          end
        end
        store_now if now - @stored_at >= STORE_EVERY
      end

      def store_now
        @stored_at = now
        @uncommitted = true if @inbox.store_processed
        return unless @commit && @uncommitted && @stored_at - @committed_at >= COMMIT_EVERY

        @committed_at = @stored_at
        @uncommitted = false
        @inbox.commit_stored
      end

      def wind_down
        @workers.settle(@finish_within)
        apply_finished
        store_now
        return unless @failure

        unfinished = @inbox.lease.dup
        @rewind.call(unfinished) unless unfinished.empty?
        raise @failure.error
      end
    end
  end
end
