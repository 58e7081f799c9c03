# frozen_string_literal: true

module Sluice
  module Testing
    # What Consumer::ParallelReading asks of the real consumer's Inbox,
    # answered from a Testing::Consumer's messages: the double's
    # each_message(concurrency:) runs the real consumer's reading loop (its
    # Workers and Lanes, bound, end and rewind), not a copy of it.
    #
    # Where the double differs, it is said here: the read ends when nothing
    # is left to hand out and nothing taken is unfinished (#stopped?); a
    # block's offset is stored as it is applied (#processed), so there is
    # nothing left to store or to poll for; there are no rebalances, so the
    # reading is never told of one. A take does not wait while a block ended
    # and the reading has not applied it (the real consumer's waits on its
    # queue, up to ParallelReading::TAKE_WAIT: a dry double would add that
    # to every concurrent read's end).
    # @api private
    class Inbox
      # Consumer::ParallelReading over the double's messages.
      # @param settings [Consumer::Parallelism]
      def self.reading(double, settings, block, retrying: -> { 0 })
        inbox = new(double)
        Sluice::Consumer::ParallelReading.new(inbox: inbox, rewind: double.method(:rewind_taken), instrument: ->(*) {},
                                              shares: Sluice::Consumer::PartitionShares::None, block: inbox.counting(block),
                                              retrying: retrying, **settings.to_h)
      end

      # @param double [Testing::Consumer]
      def initialize(double)
        @double = double
        @lock = Mutex.new
        @ended = 0 # blocks ended (workers count them)
        @applied = 0 # and applied (#processed; the reader counts them)
      end

      # The block, counting each end (a return, a raise, a kill), which wakes a waiting #take.
      def counting(block)
        lambda do |message|
          block.call(message)
        ensure
          @lock.synchronize { @ended += 1 } # before the wake: a take that asks after the wake sees it
          @double.wake
        end
      end

      # Testing::Consumer#stop was called, or the double has run dry.
      def stopped? = @double.stopping? || @double.drained?

      # The next message (lent), waiting at most timeout_ms for a feed while blocks run.
      def take(timeout_ms) = @double.take_one(timeout_ms) { @ended > @applied }

      # A block finished the message: its offset is stored as the Ledger lets it.
      def processed(message)
        @applied += 1
        @double.finish_one(message)
      end

      # What is taken and not finished.
      def lease = @double.lent

      # Stored already (#processed). @return [false]
      def store_processed = false

      # The double commits what is stored at #close (auto_commit), not as it reads.
      def commit_stored = nil

      # No broker counts the double's polls.
      def keepalive = nil

      # The double's Ledger always keeps what finished above a held message.
      def track_finished(_tracking) = nil
    end
  end
end
