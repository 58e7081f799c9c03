# frozen_string_literal: true

require "io/wait"

module Sluice
  class Consumer
    # The consumer queue as the application reads it.
    #
    # Waits on the queue's wake-up pipe through Ruby's IO, so under a fiber
    # scheduler the waiting fiber yields and no thread is needed per consumer;
    # drains the queue without blocking (Native::Consumer#consume), and deals
    # with what is not a message, in order: a rebalance is answered before
    # anything fetched after it is handed out (Rebalancer), a consumer error is
    # reported. A wait never lasts longer than half of max.poll.interval.ms, so
    # a consumer that waits on an idle topic still counts as polling.
    #
    # Offsets: a message handed out is stored once the application is done
    # with it (#processed; for poll(store: true), when the application reads
    # again), in bulk before the next drain. What was fetched
    # for a partition and not handed out is never skipped: revoked, it is
    # dropped (the next owner starts at the committed offset); paused, seeked
    # or rewound, it is given back (#give_back): dropped, and librdkafka goes
    # back to it.
    #
    # == The hand-off invariant
    #
    # A drain (Native::Consumer#consume) moves librdkafka's position past
    # everything it takes. From then on, at every instant, each of those
    # messages is in exactly one of five places:
    #
    # 1. buffered: drained, not handed out yet;
    # 2. lent: out of the buffer, not finished by the application:
    #    each_message's block runs on it, a batch is filled or yielded, poll
    #    is returning it. When the next read begins, what is still lent goes
    #    back to the front of the buffer: it is handed out again;
    # 3. handed: poll(store: true) returned it (Native::Handoff#poll); the
    #    application has it until it reads again, which finishes it (done);
    # 4. done: each_message's or each_batch's block finished it, or the
    #    application read again after poll(store: true) returned it (done,
    #    then its offset stored once no lower offset of its partition is lent
    #    or handed), or poll without store: returned it;
    # 5. rewound: a seek moved librdkafka's position back to it (#rewind,
    #    #give_back), or its partition was revoked (the next owner starts at
    #    the committed offset; what is lent or handed there is dropped: not
    #    ours to store).
    #
    # Only a done message's offset is stored (#processed, #store_processed,
    # or the application's own Consumer#store_offset after poll), and only
    # stored offsets are committed: the committed offset never passes a
    # message that is buffered, lent or rewound. librdkafka's position runs
    # ahead of what the application has seen; the committed offset never
    # does. That is the consumer's at-least-once.
    #
    # The four places and the moves between them are kept by a Ledger (a
    # pure object, with the rule for blocks that finish out of order);
    # this class decides when each move is made.
    #
    # An interrupt (Timeout, Thread#raise, Thread#kill) may land wherever Ruby
    # checks for one: on every return from a Ruby method and every loop. So
    # each move between two places is made where none lands: a drain with
    # its bookkeeping, an answered rebalance and a rewind under
    # Thread.handle_interrupt(Object => :never) (interrupts wait until the
    # messages are safe, then arrive); lending (lent before leaving the
    # buffer) and finishing (done before no longer lent) each in an order
    # that is safe when interrupted between its two steps, with no Ruby
    # method returning between them (inside Ledger#lend, Ledger#finish and
    # Ledger#finish_handed); poll's last step, from lent to the caller (and
    # to handed), in C (a C method's return is not a check). An interrupt
    # landing in poll(store: true) before it hands the next message out
    # leaves that message lent; the one handed before it is done either way
    # (the application came back from it). An interrupt can thus cost a
    # message handed out twice, never one skipped. Waits are not masked:
    # Timeout around an idle read ends it on time.
    # The mask is no fence against Fiber#raise (Async's Task#stop): it lands
    # in any wait inside a masked move (for running blocks, a seek, a
    # commit). So each move that waits is ordered to be safe when stopped
    # after any step: sought back, then dropped; a control item answered,
    # then passed (one cut short stays first, for the next read); an action
    # left to the reader removed once carried out.
    # spec/integration/consumer/interrupted_reads_spec.rb raises into the
    # reader at every step of this, and stops an Async reader in every wait.
    #
    # == One direction
    #
    # Readers ask the Inbox; the Inbox knows no reader. A reader that holds
    # messages outside it (a concurrent each_message's blocks:
    # ParallelReading) hands #reading a Holder for that read, the one way
    # the Inbox reaches it: a revocation waits for what it holds.
    class Inbox
      include Shared::Clock

      # What the Inbox asks of a reader that holds messages outside it, around
      # each rebalance it answers during that reader's read (see #reading).
      # This one holds nothing.
      module Holder
        # A revocation (or Consumer#assign replacing the assignment) is about
        # to be answered: what the holder finished must be #processed first.
        def self.before_revoke = nil

        # A rebalance was answered: given_up [Array<Array(String, Integer)>]
        # partitions are gone (what the holder has of them must go too).
        def self.after_rebalance(_given_up) = nil
      end

      # Nothing buffered or lent (shared, frozen).
      EMPTY = [].freeze
      # Items taken from the queue per drain, and the time that may take (ms).
      DRAIN_ITEMS = 2_000
      # (see DRAIN_ITEMS)
      DRAIN_BUDGET = 50
      # Items a drain takes while partitions take turns (#reading's turns:, a
      # concurrent read's). librdkafka's queues hand out at most 64 of a
      # partition in a row (ext/sluice/partition_queues.c), so a partition
      # fetched after a drain waits behind one small drain and the workers'
      # buffer, not behind 2,000 of another's: seconds (issue 55, a partition
      # assigned uncommitted kept only its start committed meanwhile).
      TURN_DRAIN_ITEMS = 64
      # At most this long (s) between two polls while buffered messages are handed out (see #keep_polling).
      KEEP_POLLING = 1.0
      # Thread.handle_interrupt's mask for a move between two places (see above).
      DEFERRED = { Object => :never }.freeze
      # Shared::Clock#now's clock, read by #poll without the call.
      MONOTONIC = Process::CLOCK_MONOTONIC
      # librdkafka's report (bundled build's patch 0008) that the group's
      # coordinator lacks KIP-848's ConsumerGroupHeartbeat.
      GROUP_PROTOCOL_UNSUPPORTED = /ConsumerGroupHeartbeatRequest not supported/

      # @param refused [#call] the KafkaError of an authentication failure not
      #   raised yet, or nil (the reader raises it instead of waiting on)
      # @param commit_starts [Boolean] commit the starts of partitions the group never committed (auto commit: #commit_drained_starts)
      def initialize(client:, rebalancer:, instrument:, keepalive_ms:, seek_timeout_ms:, refused: -> {}, commit_starts: false)
        @client = client
        @commit_starts = commit_starts
        @refused = refused
        @auth_watch = Polling::AuthWatch.new(progress: client.method(:progress))
        @refused_error = nil
        @unsupported_protocol = nil # a KafkaError to raise once (see GROUP_PROTOCOL_UNSUPPORTED)
        @seek_timeout_ms = seek_timeout_ms
        @rebalancer = rebalancer
        @instrument = instrument
        @keepalive = keepalive_ms / 1000.0
        @poll_every = [@keepalive, KEEP_POLLING].min
        @polled_at = now
        @io = IO.for_fd(client.message_fd, autoclose: false) # the native client owns the fd
        @io_lock = Mutex.new # held while waiting: the fd is closed only once nobody waits on it
        @ledger = Ledger.new
        @storing_lease = @ledger.storing_lease
        @plain_lease = @ledger.plain_lease
        @lent, @handed = @storing_lease # the ledger's own Arrays, looked at by #poll without a call
        @stopped = false
        @reader = nil
        @reader_lock = Mutex.new
        @idle = ConditionVariable.new
        @idle_waiters = 0 # threads in #wait_idle (under @reader_lock)
        @given_back = [] # [:seek, positions] and [:assign, pairs] of other threads, for the reader to carry out
        @holder = Holder # the current read's (#reading), and its @drain_items (nil: DRAIN_ITEMS)
      end

      # #stop was called and no read began since.
      def stopped? = @stopped

      # A reader that takes nothing for a while (a concurrent each_message at
      # its bound) still polls now and then (see #keep_polling).
      def keepalive = keep_polling(always: true)

      # Consumer#poll's read: the next message (lent) within timeout_ms, and
      # the lease Native::Handoff#poll hands it over from (Ledger#storing_lease
      # with store: the message goes on to handed); nil when none came. A
      # read as #reading's, without the block: poll pays for every message,
      # so its usual case is written out in line, not split into methods.
      def poll(timeout_ms, store) # rubocop:disable Metrics/CyclomaticComplexity, Metrics/PerceivedComplexity -- one frame
        fiber = Fiber.current
        # #take_slot, inline but for its rare part: poll pays this on every message.
        if @reader.nil? && !@reader_lock.locked?
          @reader = fiber
          outer = true
          return_lent unless @lent.empty?
        else
          outer = !@reader.equal?(fiber)
          @reader_lock.synchronize { claim(fiber) }
        end
        @ledger.finish_handed unless @handed.empty?
        # The usual case first, in one step: a message buffered, nothing to
        # answer or carry out before it, no keepalive poll due (#take's checks).
        # (The clock read without #now: a frame less on every message.)
        ready = @given_back.empty? && !@stopped && Process.clock_gettime(MONOTONIC) - @polled_at < @poll_every && @ledger.lend_message
        (ready || take(timeout_ms)) && (store ? @storing_lease : @plain_lease)
      ensure
        # #leave_slot, inline but for its rare part: poll pays this on every message.
        if outer && @reader.equal?(fiber)
          @stopped = false
          @reader = nil
        end
        wake_idle if @idle_waiters.positive?
      end

      # The next message, or nil when timeout_ms (nil: no limit) passed or #stop
      # was called. The message is lent: #processed finishes it (each_message),
      # Native::Handoff#poll hands it over (poll).
      # (`while true`, not `loop`: a return from loop's block unwinds through
      # a C frame, a cost paid on every message; one clock read for the
      # deadline and #keep_polling's test, on every message too.)
      def take(timeout_ms)
        started = now
        deadline = timeout_ms && started + (timeout_ms / 1000.0)
        keep_polling if started - @polled_at >= @poll_every
        while true # rubocop:disable Style/InfiniteLoop
          give_back_for_others unless @given_back.empty?
          while @ledger.buffered? && !@stopped
            next answer(@ledger.peek) unless @ledger.peek.is_a?(Message)

            return @ledger.lend
          end
          return nil if @stopped
          next if refill

          raise_refused
          return nil if deadline && now >= deadline

          wait(deadline)
        end
      end

      # Up to max_items messages, waiting up to max_wait_ms for the batch to
      # fill. [] when none came; nil once stopped (and nothing was taken).
      # The batch is lent until #processed_batch.
      def take_batch(max_items, max_wait_ms)
        batch = []
        deadline = now + (max_wait_ms / 1000.0)
        keep_polling
        loop do
          give_back_for_others unless @given_back.empty?
          fill(batch, max_items) unless @stopped
          return batch if batch.size >= max_items
          return (batch.empty? ? nil : batch) if @stopped
          next if refill

          raise_refused if batch.empty?
          return batch if now >= deadline

          wait(deadline)
        end
      end

      # The application is done with message: its offset is stored (soon).
      # Done, then no longer lent: an interrupt between the two costs a
      # message handed out again, not one lost.
      # Blocks may finish out of order: the offset waits for the lower ones (Ledger#storable!).
      def processed(message) = @ledger.finish(message)

      # What is lent, in buffer order: after #take, its last message is the one taken.
      def lease = @ledger.lent

      # Stores the offsets after a batch each_batch's block finished with.
      def processed_batch(messages)
        @client.store_offsets(messages, messages.size)
        @ledger.unlend(messages)
      end

      # The messages (lent) were not finished: each partition goes back to
      # its first one of them, so none is skipped, and they are no longer
      # lent. If that seek fails they stay lent: the next read hands them
      # out again.
      # @return [Array, nil] the seek's error tuple
      def rewind(messages)
        Thread.handle_interrupt(DEFERRED) do
          store_processed
          firsts = messages.group_by { |m| [m.topic, m.partition] }.map { |(topic, partition), list| [topic, partition, list.map(&:offset).min] }
          error = give_back(firsts)
          @ledger.rewound(messages) unless error
          error
        end
      end

      # Stores the offsets of what was processed (before a commit, a revoke,
      # close). Not what poll(store: true) handed: the application has not read again.
      # What is done above a partition's lowest unfinished message goes in the
      # stored offset's metadata (Ledger#finished_above), for a concurrent read.
      # @return [Boolean] something was stored
      def store_processed
        return false unless @ledger.done?

        ready = @ledger.storable!
        @client.store_offsets(ready, ready.size) unless ready.empty?
        held = @ledger.finished_above(ready)
        @client.store_positions(held) unless held.empty?
        !(ready.empty? && held.empty?)
      end

      # Commits what is stored, without waiting (ParallelReading::COMMIT_EVERY).
      def commit_stored = @client.commit(nil, true)

      # A concurrent read keeps what finished above each partition's lowest
      # unfinished message (see #store_processed).
      # The partitions assigned before it began are learned of now (#learn_finished).
      def track_finished(tracking)
        @ledger.tracking = tracking && Inbox.finished_metadata?
        learn_finished(@client.assignment.map { |topic, partition| [topic, partition] }) if @ledger.tracking?
      end

      # librdkafka stores an offset's metadata with it since 2.2 (rd_kafka_offsets_store); before, it drops it.
      def self.finished_metadata?
        return @finished_metadata unless @finished_metadata.nil?

        @finished_metadata = Gem::Version.new(Sluice.librdkafka_version) >= Gem::Version.new("2.2")
      end

      # Messages an earlier member finished above the committed offsets of
      # these partitions are skipped (FinishedOffsets): read from the group
      # once per assignment, by a concurrent read (its start, a rebalance
      # during it); a failure skips nothing.
      def learn_finished(pairs)
        pairs = @ledger.unlearned(pairs)
        return if pairs.empty? || !@ledger.tracking?

        error, offsets = Shared::Blocking.call { @client.committed_metadata(pairs, @seek_timeout_ms) }
        return unless error.zero?

        offsets.each do |topic, partition, offset, metadata|
          @ledger.skip(topic, partition, offset, FinishedOffsets.decode(metadata, offset))
        end
      end

      # What the group committed for partitions just assigned, read once for
      # both of its uses: what an earlier member finished above it (a
      # concurrent read: #learn_finished), and which partitions have no
      # committed offset, whose start is committed as drained (auto commit:
      # #commit_drained_starts). A failure learns nothing (nothing skipped, no start).
      def learn_assigned(pairs)
        return if pairs.empty?
        return learn_finished(pairs) unless @commit_starts

        error, offsets = Shared::Blocking.call { @client.committed_metadata(pairs, @seek_timeout_ms) }
        return unless error.zero?

        if @ledger.tracking?
          offsets.each { |topic, partition, offset, metadata| @ledger.skip(topic, partition, offset, FinishedOffsets.decode(metadata, offset)) }
        end
        @ledger.assigned(offsets.filter_map { |topic, partition, offset| [topic, partition] if offset.negative? })
      end

      # Drops what was fetched, not handed out, for these [topic, partition] pairs.
      # @param lent [Boolean] what is lent too (a revoke: those partitions are gone)
      # @return [Hash{Array(String, Integer) => Integer}] each partition's first
      #   dropped offset (partitions with nothing dropped are left out)
      def drop(partitions, lent: false) = @ledger.drop(partitions, lent: lent)

      # The one way buffered messages leave without being handed out, but for
      # a revoke: what is buffered for these partitions is dropped and
      # librdkafka's position goes to the offset given or, when that is nil,
      # to the first message dropped, so it is fetched again, not skipped
      # (librdkafka's position is past everything drained into the buffer).
      # The buffer is its reader's alone: called from another thread or fiber
      # while one reads, this is left to the reader, which carries it out
      # before it hands out anything else (a failed seek is reported there).
      # @param positions [Array<Array(String, Integer, Integer, nil)>]
      # @return [Array, nil] the seek's error tuple
      def give_back(positions)
        return seek_back(positions) if reader?(Fiber.current)

        for_the_reader(:seek, positions) do
          return_lent # nobody reads, and no read starts meanwhile: what is lent was not finished
          seek_back(positions)
        end
      end

      # Consumer#assign: the assignment replaced. What is held of the old one
      # goes with it, as in a revoke: what was processed is stored first, then
      # librdkafka assigns, then every message buffered, lent or handed is
      # dropped unread (librdkafka drops what it still queues of the old
      # assignment itself; what was drained here comes from the old
      # positions, so a partition assigned again would otherwise hand out its
      # old buffer before the offset asked for). Left to the reader like a
      # seek when another thread or fiber reads: its assign error is reported
      # there (`error.occurred`, type consumer.assign_error).
      # @param pairs [Array<Array(String, Integer)>, Array<Array(String, Integer, Integer)>]
      # @return [Array, nil] the assign's error tuple
      def reassign(pairs)
        return replace_assignment(pairs) if reader?(Fiber.current)

        for_the_reader(:assign, pairs) { replace_assignment(pairs) }
      end

      # Ends the current read (each_message, each_batch, poll): its wait, and
      # every take after the current one. With no read under way, the next
      # read is the one it ends, at once: a stop that came just before the
      # read began (a signal as the loop starts, a thread's read not begun
      # yet) is not lost. A read spends the stops that came while it ran when
      # it returns; the one after starts afresh. What was fetched and not
      # handed out stays for that next read.
      # Safe from any thread, fiber or signal handler.
      def stop
        @stopped = true
        @client.wake_messages
      end

      # Serves the queue until librdkafka finished leaving the group (after
      # Native::Consumer#close_begin): rebalances answered, messages dropped.
      def serve_until_closed(deadline)
        until @client.consumer_closed?
          @client.consume(DRAIN_ITEMS, DRAIN_BUDGET).each do |item|
            # A group that terminated waits for no answer: one would be lost
            # without its patch 0003, and wait forever (librdkafka issue 4884).
            break if @client.consumer_closed?

            control(item, deadline) unless item.is_a?(Message) # messages: dropped
          end
          break if now >= deadline

          wait(deadline) unless @client.consume_exhausted?
        end
      end

      # Runs the block as the consumer's only reader (one thread or fiber at
      # a time).
      # @param holder [#before_revoke, #after_rebalance] what this read holds
      #   outside the Inbox (see Holder), told of each rebalance answered in it
      # @param turns [Boolean] partitions taken in turns (a concurrent read's):
      #   each from a queue of its own (Native::Consumer#own_partition_queues=),
      #   TURN_DRAIN_ITEMS a drain
      def reading(holder = nil, turns: false, &block)
        fiber = Fiber.current
        outer = !@reader.equal?(fiber) # not nested in a read of fiber's own (see #leave_slot)
        take_slot(fiber)
        holder ? held_by(holder, turns, &block) : yield
      ensure
        leave_slot(fiber, outer)
      end

      def reading? = !@reader.nil?

      def reader?(fiber) = @reader.equal?(fiber)

      # Waits (at most seconds) for the reader to return. @return [Boolean] it did
      def wait_idle(seconds)
        deadline = now + seconds
        @reader_lock.synchronize do
          @idle_waiters += 1
          while @reader
            left = deadline - now
            return false if left <= 0

            @idle.wait(@reader_lock, left)
          end
        ensure
          @idle_waiters -= 1
        end
        true
      end

      # Waits are over for good; the native client may close the pipe after this.
      def shut = @io_lock.synchronize { @io = nil }

      private

      # Takes the reading slot for fiber (see #reading). Reading again is how
      # the application says it came back from what poll(store: true) handed
      # it: that is done now.
      # The slot is taken without the lock when nobody reads and nobody holds
      # it (poll takes it for every message; the lock costs more than the
      # rest of the claim): from the test to the assignment no interrupt is
      # checked for (no Ruby method returns, no branch is taken), so no other
      # thread runs in between; the lock's holders (a claim, #give_back with
      # nobody reading) are waited for on the other way.
      def take_slot(fiber)
        if @reader.nil? && !@reader_lock.locked?
          @reader = fiber
          return_lent unless @ledger.lent.empty? # #begin_read, inline
        else
          @reader_lock.synchronize { claim(fiber) }
        end
        @ledger.finish_handed
      end

      # Released in one step no interrupt lands in, before any lock: one
      # landing as the lock was taken left the consumer read by nobody for
      # ever (a killed reader's replacement was refused). Only by the outer
      # read (a nested one, poll inside each_message, leaves the slot and the
      # stop to it), which spends the stops that came while it ran: cleared
      # just before the slot is free, so one after that is the next read's
      # (see #stop). Then waiters of #wait_idle, if any, are woken (masked:
      # rare, and not to be lost). (Called first thing in an ensure clause,
      # with the fiber and outer got before the slot was taken: a claim
      # interrupted as it returns is released.)
      def leave_slot(fiber, outer)
        if outer && @reader.equal?(fiber)
          @stopped = false
          @reader = nil
        end
        wake_idle if @idle_waiters.positive?
      end

      def wake_idle = Thread.handle_interrupt(DEFERRED) { @reader_lock.synchronize { @idle.broadcast } }

      # Only the reader (the slot is taken) sets it, so no other read's holder is touched.
      def held_by(holder, turns)
        @holder = holder
        take_turns(true) if turns
        yield
      ensure
        @holder = Holder
        take_turns(false) if turns
      end

      # A close (this thread's, or another's under way) hands the queues back itself.
      def take_turns(taking)
        @drain_items = taking ? TURN_DRAIN_ITEMS : nil
        @client.own_partition_queues = taking unless @client.closed?
      rescue Errors::ConsumerClosedError
        nil
      end

      def claim(fiber)
        raise Errors::ConsumerStateError, "this consumer is already being read by another thread or fiber" if @reader && !@reader.equal?(fiber)
        return if @reader # a nested read (poll inside each_message) keeps the stop and what is lent

        @reader = fiber
        begin_read
      end

      def begin_read
        return_lent unless @ledger.lent.empty?
      end

      # What is still lent when a read begins was not finished (an interrupt
      # landed between the buffer and the application): back to the front of
      # the buffer, in order (Ledger#return_lent).
      def return_lent = Thread.handle_interrupt(DEFERRED) { @ledger.return_lent }

      # Sought back, then dropped: an interrupt between the two costs
      # messages handed out twice, not skipped. (The mask holds off a
      # Thread#raise; a Fiber#raise, Async's Task#stop, ignores it and lands
      # in the seek's wait, so the order is what keeps the messages.)
      def seek_back(positions)
        Thread.handle_interrupt(DEFERRED) do
          pairs = positions.map { |topic, partition| [topic, partition] }
          firsts = @ledger.firsts(pairs)
          seeks = positions.filter_map do |topic, partition, offset|
            offset ||= firsts[[topic, partition]]
            [topic, partition, offset] if offset
          end
          error, = Shared::Blocking.call { @client.seek(seeks, @seek_timeout_ms) } unless seeks.empty?
          drop(pairs)
          error
        end
      end

      # Runs the block now when nobody reads (no read starts meanwhile), else
      # leaves the action to the reader (#give_back_for_others), before it
      # hands out anything else.
      def for_the_reader(action, argument)
        @reader_lock.synchronize do
          next yield unless @reader

          @given_back << [action, argument]
          @client.wake_messages # a waiting reader has nothing buffered, but this must not wait for its next message
          nil
        end
      end

      # Each action leaves the list once carried out: one a stop (Fiber#raise)
      # cut short is carried out by the next read, not lost.
      def give_back_for_others
        while (given = @reader_lock.synchronize { @given_back.first })
          action, argument = given
          error = action == :assign ? replace_assignment(argument) : seek_back(argument)
          @reader_lock.synchronize { @given_back.shift if @given_back.first.equal?(given) }
          @instrument.call("error.occurred", type: "consumer.#{action}_error", error: KafkaError.from_tuple(error)) if error
        end
      end

      # Stored, assigned and dropped in one step (see #reassign); a concurrent
      # each_message's running blocks finish first, as before a revoke.
      def replace_assignment(pairs)
        Thread.handle_interrupt(DEFERRED) do
          @holder.before_revoke
          store_processed
          error = @client.assign(pairs, false)
          held = @ledger.partitions
          drop(held, lent: true)
          @holder.after_rebalance(held)
          error
        end
      end

      # Drains the queue into the buffer, once what it held was handed out.
      # @return [Boolean] something came
      def refill
        return false if @ledger.buffered?

        Thread.handle_interrupt(DEFERRED) do
          store_processed
          items = drain(@drain_items || DRAIN_ITEMS)
          @ledger.fill(items)
          commit_drained_starts(items)
        end
        @ledger.buffered?
      end

      # A slow application can take long over what one drain buffered, while
      # librdkafka counts only polls of the queue for max.poll.interval.ms and
      # commits only stored offsets: now and then, store what was processed
      # and poll for one more item. A rebalance found there is answered at
      # once (what is buffered for partitions it gives up is dropped unread):
      # from the front of the buffer, where a stop cutting the answer short
      # leaves it for the next read (#answer).
      def keep_polling(always: false)
        return if !(always || @ledger.buffered?) || now - @polled_at < @poll_every

        Thread.handle_interrupt(DEFERRED) do
          store_processed
          items = drain(1)
          items.each do |item|
            next @ledger.append(item) if item.is_a?(Message)

            @ledger.prepend(item)
            answer(item)
          end
          commit_drained_starts(items)
        end
      end

      # The starts of partitions the group never committed (#learn_assigned),
      # committed as soon as drained (Ledger#starts!), without waiting: else
      # such a partition has no committed offset until a message finished
      # there (a concurrent read's first one may wait seconds behind other
      # partitions' messages), and a member taking it over meanwhile starts
      # at auto.offset.reset: from its beginning (earliest) or past
      # everything before (latest: skipped). Committed, not stored:
      # librdkafka commits what is stored when a partition is unassigned,
      # and a stored start would undo a commit the application made further.
      def commit_drained_starts(items)
        @ledger.drained(@client.first_offsets(items)) if @ledger.awaiting_starts? && !items.empty?
        starts = @ledger.starts!
        @client.commit(starts.map { |topic, partition, offset| [topic, partition, offset] }, true) unless starts.empty?
      end

      def drain(max_items)
        @polled_at = now
        @client.consume(max_items, DRAIN_BUDGET)
      end

      def fill(batch, max_items)
        while @ledger.buffered? && batch.size < max_items
          item = @ledger.peek
          if item.is_a?(Message)
            batch << @ledger.lend
          else
            given_up = answer(item)
            batch.reject! { |message| given_up.include?([message.topic, message.partition]) } unless given_up.empty?
          end
        end
      end

      # The next buffered item (a control item), answered, then passed: a
      # rebalance is answered always (librdkafka waits for the answer), and
      # once (Rebalancer). The mask holds off a Thread#raise; a Fiber#raise
      # (Async's Task#stop) ignores it and may land in the wait for running
      # blocks or the commit before a revoke: the item, still first in the
      # buffer, is answered by the next read.
      def answer(item)
        Thread.handle_interrupt(DEFERRED) do
          given_up = control(item)
          @ledger.pass if @ledger.peek.equal?(item)
          given_up
        end
      end

      # @param deadline [Float, nil] a closing consumer's: the commit before a revoke waits no longer
      # @return [Array<Array(String, Integer)>] partitions given up (their
      #   messages not handed out yet are dropped)
      def control(item, deadline = nil)
        case item.first
        when :rebalance then rebalance(item, deadline)
        when :error
          error = KafkaError.new(item[1], item[2], fatal: item[3])
          @refused_error = @auth_watch.observe(error) || @refused_error
          @unsupported_protocol = error if error.code == :unsupported_feature && GROUP_PROTOCOL_UNSUPPORTED.match?(error.description.to_s)
          @instrument.call("error.occurred", type: "consumer.error", error: error)
          EMPTY
        when :eof # with enable.partition.eof: nothing more in the partition for now
          @instrument.call("consumer.partition_eof", topic: item[1], partition: item[2], offset: item[3])
          EMPTY
        else
          EMPTY
        end
      end

      def rebalance(item, deadline)
        @holder.before_revoke unless item[1] == :assign
        store_processed # what was processed is committed before partitions go
        given_up = @rebalancer.call(*item.drop(1), commit_within: deadline && ms_until(deadline))
        learn_assigned(item[2].map { |topic, partition| [topic, partition] }) if item[1] == :assign
        drop(given_up, lent: true)
        @holder.after_rebalance(given_up)
        given_up
      end

      # Until the deadline, and at most half of max.poll.interval.ms: the
      # drain after it counts as polling (librdkafka's own test).
      # Nothing to hand out, and the broker refused the consumer's credentials
      # (reported on this queue, or on the main queue: see Consumer#new_auth_failure).
      def raise_refused
        error = @refused_error || @refused.call
        @refused_error = nil
        raise Errors::AuthenticationError, error if error

        return unless (unsupported = @unsupported_protocol)

        @unsupported_protocol = nil
        raise Errors::GroupProtocolUnsupportedError, unsupported
      end

      def wait(deadline)
        return if @client.consume_exhausted? # the pipe is empty but events are left: no wake-up will come

        left = deadline ? [deadline - now, @keepalive].min : @keepalive
        @io_lock.synchronize { @io&.wait_readable(left) if left.positive? && !@stopped }
      end
    end
  end
end
