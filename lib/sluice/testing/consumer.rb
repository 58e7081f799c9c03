# frozen_string_literal: true

require "securerandom"
require_relative "log"
require_relative "inbox"
require_relative "failure_policy"

module Sluice
  module Testing
    # A consumer that reads from memory: a spec feeds it messages and runs the
    # application's each_message / each_batch / poll code on them, with the
    # public API and the offset rules of Sluice::Consumer:
    #
    # - each_message stores a message's offset (the one after it) once its
    #   block finished, each_batch a batch's; commit commits what is stored
    #   (close too, unless auto_commit: false), and a new consumer of the same
    #   messages would start there (#committed);
    # - a block that raises (or breaks) stores nothing and puts the partition
    #   back to the message (each_batch: to its first message of the batch):
    #   it is handed out again;
    # - pause stops handing out a partition, skipping nothing; resume goes on
    #   where it stopped; seek moves the partition's position.
    #
    # Unlike a real consumer, reading ends when nothing is left: each_message
    # and each_batch return once every message fed (to assigned, unpaused
    # partitions) was handed out, poll returns nil then (or waits up to its
    # timeout for a #feed from another thread). #stop ends them earlier.
    # Messages are handed out in the order they were fed.
    #
    # @example
    #   consumer = Sluice::Testing::Consumer.new
    #   consumer.feed(topic: "orders", key: "order-1", payload: "42")
    #   consumer.feed(topic: "orders", payload: "43", partition: 1)
    #   consumer.subscribe("orders")
    #   consumer.each_message { |message| puts "#{message.partition}/#{message.offset}: #{message.payload}" }
    #   consumer.commit
    #   consumer.committed # => { "orders" => { 0 => 1, 1 => 1 } }
    #   consumer.close
    class Consumer
      include Clock
      include Sluice::Consumer::Arguments
      include FailurePolicy

      # What #committed says of a partition with no committed offset (RD_KAFKA_OFFSET_INVALID).
      NO_OFFSET = -1001
      # For #seek and #assign: the partition's first message (RD_KAFKA_OFFSET_BEGINNING).
      OFFSET_BEGINNING = -2
      # For #seek and #assign: the next message fed to the partition (RD_KAFKA_OFFSET_END).
      OFFSET_END = -1

      # Names the consumer in error messages and #inspect.
      # @return [String]
      attr_reader :id

      # An empty consumer: nothing fed, nothing subscribed or assigned.
      # @param id [String] default: "sluice-testing-" and 8 random hex digits
      # @param auto_commit [Boolean] close commits the stored offsets (as "enable.auto.commit")
      # @param poll_store [Boolean] poll's store: when a call does not pass it (as Consumer::Config#poll_store)
      def initialize(id: "sluice-testing-#{SecureRandom.hex(4)}", auto_commit: true, poll_store: false)
        @id = id
        @auto_commit = auto_commit
        @poll_store = poll_store
        @log = Log.new
        @lock = Mutex.new
        @fed = ConditionVariable.new
        @subscription = []
        @assigned = {} # [topic, partition] => true, from #assign
        @positions = {} # [topic, partition] => next offset to hand out
        @paused = {}
        @stored = {}
        @committed = {}
        @stored_metadata = {} # [topic, partition] => what finished above the stored offset (Consumer::FinishedOffsets)
        @committed_metadata = {}
        @stopping = false
        @closed = false
        @ledger = Sluice::Consumer::Ledger.new # the real consumer's offset rules (see #handle)
        @ledger.tracking = true # what finished above a held message is kept in the offset's metadata
      end

      # Adds a message at the end of its partition (as a producer would), and
      # wakes a #poll waiting in another thread.
      # @param topic [String, Symbol]
      # @param payload [String, nil] nil: a tombstone
      # @param key [String, nil]
      # @param partition [Integer] created when first fed; offsets count from 0
      # @param headers [Hash{String => String, Array<String>}, nil] an Array value: that header repeated
      # @param timestamp [Time, Integer] a Time or milliseconds since the epoch
      # @return [Message] the message as it will be handed out, with its offset
      # @raise [ArgumentError] a payload or key that is not a String, a bad topic or partition
      def feed(topic:, payload: nil, key: nil, partition: 0, headers: nil, timestamp: Time.now)
        raise ArgumentError, "payload must be a String or nil, got #{payload.class}" unless payload.nil? || payload.is_a?(String)
        raise ArgumentError, "key must be a String or nil, got #{key.class}" unless key.nil? || key.is_a?(String)

        timestamp_ms = timestamp.is_a?(Time) ? (timestamp.to_r * 1000).to_i : timestamp
        @lock.synchronize do
          @log.append(topic_name(topic), partition_number(partition), [key&.b, payload&.b, timestamp_ms, raw_headers(headers)]).tap { @fed.broadcast }
        end
      end

      # Reads these topics: every partition fed to them, now or later. Replaces
      # the previous subscription.
      # @param topics [Array<String, Symbol>] (an Array is flattened)
      # @return [nil]
      # @raise [ArgumentError] no topic, or one that is not a non-empty String or Symbol
      def subscribe(*topics)
        topics = topics.flatten.map { |topic| topic_name(topic) }
        raise ArgumentError, "subscribe needs at least one topic" if topics.empty?

        open!
        @lock.synchronize { @subscription = topics }
        nil
      end

      # Stops reading the subscribed topics; partitions given to #assign are still read.
      # @return [nil]
      def unsubscribe = @lock.synchronize { @subscription = [] } && nil

      # Reads these partitions (besides the subscribed topics), outside a
      # group: they replace the ones an earlier assign gave, as
      # Sluice::Consumer#assign's do. An offset given moves the partition's
      # position there (OFFSET_BEGINNING, OFFSET_END allowed).
      # @param assignments [Hash] topic => [partition, ...] or topic => { partition => offset }
      # @return [nil]
      def assign(assignments)
        open!
        @lock.synchronize do
          @assigned = {}
          assignments.each do |topic, partitions|
            (partitions.is_a?(Hash) ? partitions : Array(partitions).to_h { |p| [p, nil] }).each do |partition, offset|
              key = [topic_name(topic), partition_number(partition)]
              @assigned[key] = true
              @positions[key] = absolute(key, offset) if offset
            end
          end
        end
        nil
      end

      # The partitions read: those fed to subscribed topics, and those assigned.
      # @return [Hash{String => Array<Integer>}] topic => partitions, sorted
      def assignment
        open!
        @lock.synchronize { assigned }.group_by(&:first).transform_values { |list| list.map(&:last).sort }
      end

      # Yields every message (see the class comment for when it returns).
      # With concurrency above 1, the blocks run side by side in
      # Sluice::Consumer#each_message's own reading (Consumer::ParallelReading:
      # same settings, order rules, bound and offset rule; see Testing::Inbox
      # for how the end differs).
      # @param concurrency [Integer] blocks at once
      # @param ordering [Symbol] :key, :partition or :none
      # @param max_buffered [Integer] messages taken and not finished, at most
      # @param max_buffered_bytes [Integer] their keys' and payloads' bytes, at most
      # @param finish_within [Numeric] ms a stop or an error waits for running blocks
      # @param retries [Hash, nil] { attempts:, backoff: } as Sluice::Consumer#each_message's (backoffs are waited)
      # @param dead_letter [Hash, nil] { topic:, producer:, partitioner: }: producer is required here (an in-memory one,
      #   config.client_class = Sluice::Clients::Buffered, for have_produced); source_consumer_group is this double's id
      # @yieldparam message [Message]
      # @return [nil]
      # @raise [ArgumentError] a setting out of range
      def each_message(concurrency: 1, ordering: :key, max_buffered: nil, max_buffered_bytes: 64 << 20, finish_within: 30_000,
                       retries: nil, dead_letter: nil, &block)
        settings = Sluice::Consumer::Parallelism.new(concurrency: concurrency, ordering: ordering, max_buffered: max_buffered,
                                                     max_buffered_bytes: max_buffered_bytes, finish_within: finish_within)
        policy = failure_policy(retries, dead_letter)
        return read_parallel(settings, policy, block) if settings.parallel?

        read_each(1, policy, batch: false, &block)
      end

      # Yields batches of up to max_items messages (max_wait: accepted, not waited).
      # @param max_items [Integer] the largest batch
      # @param max_wait [Integer] ignored: nothing is waited for
      # @param retries [Hash, nil] as #each_message's
      # @param dead_letter [Hash, nil] as #each_message's
      # @yieldparam messages [Array<Message>]
      # @return [nil]
      # @raise [ArgumentError] max_items is not a positive Integer
      def each_batch(max_items: 500, max_wait: 100, retries: nil, dead_letter: nil, &block) # rubocop:disable Lint/UnusedMethodArgument -- Consumer#each_batch's signature
        raise ArgumentError, "max_items must be a positive Integer, got #{max_items.inspect}" unless max_items.is_a?(Integer) && max_items.positive?

        read_each(max_items, failure_policy(retries, dead_letter), batch: true, &block)
      end

      # The next message, or nil once none came within timeout_ms. Its offset
      # is not stored: call #store_offset once it is processed, or pass
      # store: true, as Sluice::Consumer#poll takes it: the message is taken
      # as finished when the consumer is read again (this poll stores the one
      # the poll before it returned), never at close.
      # @param timeout_ms [Integer] how long to wait for a #feed from another thread (0: not at all)
      # @param store [Boolean] the next read (poll, each_message, each_batch) stores this message's offset
      #   (default: the poll_store given to new)
      # @return [Message, nil]
      def poll(timeout_ms = 0, store: @poll_store)
        deadline = now + (timeout_ms / 1000.0)
        reading do
          loop do
            message = take(1)&.first
            @lock.synchronize { hand_over(message, store) } if message
            break message if message || !wait_for_feed(deadline)
          end
        end
      end

      # What the next commit commits for the message's partition: the offset after it.
      # @param message [Message]
      # @return [nil]
      # @raise [ArgumentError] not a Sluice::Message
      def store_offset(message)
        raise ArgumentError, "store_offset takes a Sluice::Message, got #{message.class}" unless message.is_a?(Message)

        open!
        @lock.synchronize { @stored[[message.topic, message.partition]] = message.offset + 1 }
        nil
      end

      # Commits the stored offsets, or the given ones instead (each the offset
      # of the next message to read).
      # @param offsets [Hash, nil] topic => { partition => offset }; nil: the stored ones
      # @param async [Boolean] accepted, as Consumer#commit's; the commit is done on return either way
      # @param by_topic [Hash] the offsets as keywords (commit(orders: { 0 => 5 }))
      # @return [nil]
      def commit(offsets = nil, async: false, **by_topic) # rubocop:disable Lint/UnusedMethodArgument -- Consumer#commit's signature
        open!
        offsets ||= by_topic unless by_topic.empty?
        @lock.synchronize do
          next commit_stored unless offsets

          offsets.each do |topic, partitions|
            partitions.each do |p, offset|
              @committed[key = [topic_name(topic), partition_number(p)]] = offset
              @committed_metadata.delete(key)
            end
          end
        end
        nil
      end

      # Committed offsets of the assignment (NO_OFFSET: none committed yet).
      # @return [Hash{String => Hash{Integer => Integer}}]
      def committed
        open!
        offsets = @lock.synchronize { assigned.map { |key| [*key, @committed.fetch(key, NO_OFFSET)] } }
        offsets.group_by(&:first).transform_values { |list| list.to_h { |_, partition, offset| [partition, offset] } }
      end

      # Stops handing out the partition; what it still has is handed out after #resume.
      # @return [nil]
      # @raise [Errors::ConsumerStateError] the partition is not assigned
      def pause(topic, partition) = change(topic, partition) { |key| @paused[key] = true }

      # Hands the partition out again from where #pause stopped it.
      # @return [nil]
      # @raise [Errors::ConsumerStateError] the partition is not assigned
      def resume(topic, partition) = change(topic, partition) { |key| @paused.delete(key) }

      # The next message of the partition will be the one at offset
      # (OFFSET_BEGINNING, OFFSET_END: the first one, the next one fed).
      # @param offset [Integer]
      # @return [nil]
      # @raise [ArgumentError] offset is not an Integer
      # @raise [Errors::ConsumerStateError] the partition is not assigned
      def seek(topic, partition, offset)
        raise ArgumentError, "an offset is an Integer, got #{offset.inspect}" unless offset.is_a?(Integer)

        change(topic, partition) { |key| @positions[key] = absolute(key, offset) }
      end

      # each_message, each_batch and poll return after the current message or
      # batch (call it from a block or another thread). The next read starts afresh.
      # @return [nil]
      def stop
        @stopping = true
        nil
      end

      # Commits what is stored (auto_commit), then refuses every read, commit
      # and partition change: they raise Errors::ConsumerClosedError. A second
      # call does nothing.
      # @return [nil]
      def close
        return if @closed

        commit if @auto_commit
        @closed = true
        nil
      end

      # #close was called.
      def closed? = @closed

      # Testing::Inbox's side of the double: the next message, lent; nil once
      # timeout_ms passed without one, at once when the double ran dry
      # (#drained?) or the block says the wait is over (asked under the lock, before each wait: see #wake).
      # @api private
      def take_one(timeout_ms, &over)
        deadline = now + (timeout_ms / 1000.0)
        nil until (message = take(1)&.first) || drained? || !wait_for_feed(deadline, &over)
        message
      end

      # Ends a #take_one's wait, to ask its block again.
      # @api private
      def wake = @lock.synchronize { @fed.broadcast }

      # Testing::Inbox's side of the double: message finished by its block.
      # @api private
      def finish_one(message) = @lock.synchronize { finish([message]) }

      # Nothing left to hand out, and nothing taken unfinished: a read of the double ends.
      # @api private
      def drained? = @lock.synchronize { @ledger.lent.empty? && @log.next_of(readable).nil? }

      # What is taken and not finished, in the order taken.
      # @api private
      def lent = @lock.synchronize { @ledger.lent.dup }

      # Each partition of messages back to its first one of them (they are handed out again).
      # @api private
      def rewind_taken(messages) = @lock.synchronize { rewind(messages) }

      # @api private
      def stopping? = @stopping

      # What Producer#transaction_mark_as_consumed hands to the (in-memory) client: this consumer.
      # @api private
      def native = open!

      # What an in-memory producer's transaction commits for this consumer
      # (Producer#transaction_mark_as_consumed), once it commits: #committed
      # shows it, as the broker commits a real consumer's offsets with the
      # transaction. An aborted transaction commits nothing.
      # @param offsets [Array<Array(String, Integer, Integer)>] topic, partition, the offset after the last message consumed
      # @api private
      def commit_in_transaction(offsets)
        @lock.synchronize { offsets.each { |topic, partition, offset| @committed[[topic, partition]] = offset } }
        nil
      end

      # Shows the id and whether the consumer is closed.
      def inspect = "#<#{self.class.name} id=#{@id.inspect} #{@closed ? "closed" : "open"}>"

      private

      # The message (or batch) is done when its block finished: its offsets
      # are stored, as the Ledger lets them (never past one lent). Otherwise
      # each of its partitions goes back to its first one.
      def handle(messages)
        finished = false
        begin
          yield
          finished = true
        ensure
          @lock.synchronize { finished ? finish(messages) : rewind(messages) }
        end
      end

      def finish(messages)
        messages.each { |message| @ledger.finish(message) }
        store_done
      end

      # What the Ledger lets be stored, and what finished above each
      # partition's lowest unfinished message in the offset's metadata, as
      # Consumer::Inbox#store_processed stores them.
      def store_done
        ready = @ledger.storable!
        store(ready)
        @ledger.finished_above(ready).each do |topic, partition, offset, metadata|
          @stored[[topic, partition]] = offset
          @stored_metadata[[topic, partition]] = metadata
        end
      end

      # Each partition's highest offset among messages, as Native::Consumer#store_offsets stores it (no metadata).
      def store(messages)
        highest = messages.group_by { |message| [message.topic, message.partition] }
        highest.each_key { |key| @stored_metadata.delete(key) }
        @stored.merge!(highest.transform_values { |list| list.map(&:offset).max + 1 })
      end

      def commit_stored
        @stored.each_key { |key| @committed_metadata.delete(key) unless @stored_metadata.key?(key) }
        @committed.merge!(@stored)
        @committed_metadata.merge!(@stored_metadata)
      end

      def rewind(messages)
        @ledger.rewound(messages).each { |topic, partition, offset| @positions[[topic, partition]] = offset }
      end

      # poll's message leaves the ledger: with store, for handed (the next
      # read finishes it); without, its offset is the caller's to store.
      def hand_over(message, store)
        @ledger.handed << message if store
        @ledger.unlend([message])
      end

      # What an earlier read left lent (interrupted between taking and
      # finishing) goes back first: lent, it would hold its partition's offsets back.
      # What poll(store: true) handed is finished: the application read again.
      def reading
        open!
        @lock.synchronize do
          rewind(@ledger.lent.dup) unless @ledger.lent.empty?
          @ledger.finish_handed
          store_done
        end
        yield
      ensure
        @stopping = false
      end

      # Up to count messages in the order fed, from the assigned, unpaused
      # partitions' positions, lent; nil when there is none (or #stop was called).
      # A message an earlier reader finished above the committed offset
      # (its metadata) is skipped, as done (Ledger#skip).
      def take(count)
        @lock.synchronize do
          batch = []
          while batch.size < count && !@stopping && (message = @log.next_of(readable))
            @positions[[message.topic, message.partition]] = message.offset + 1
            @ledger.fill([message])
            batch << @ledger.lend if @ledger.buffered?
          end
          store_done if @ledger.done?
          batch unless batch.empty?
        end
      end

      def readable = (assigned - @paused.keys).to_h { |key| [key, position(key)] }

      # Where a partition is read from first: its committed offset, else its first message.
      # What finished above the committed offset (its metadata) is skipped from there.
      def position(key)
        @positions[key] ||= begin
          committed = @committed.fetch(key, NO_OFFSET)
          @ledger.skip(*key, committed, Sluice::Consumer::FinishedOffsets.decode(@committed_metadata[key], committed)) if committed >= 0
          [committed, 0].max
        end
      end

      def assigned = (@log.partitions.select { |topic, _| @subscription.include?(topic) } + @assigned.keys).uniq

      def wait_for_feed(deadline, &over)
        @lock.synchronize do
          left = deadline - now
          left.positive? && !@stopping && !over&.call && (@fed.wait(@lock, left) || true)
        end
      end

      def change(topic, partition)
        open!
        key = [topic_name(topic), partition_number(partition)]
        @lock.synchronize do
          unless assigned.include?(key)
            raise Errors::ConsumerStateError, "#{key.join("/")} is not assigned to consumer #{@id} (assignment: #{assigned.inspect})"
          end

          yield key
        end
        nil
      end

      def absolute(key, offset)
        case offset
        when OFFSET_BEGINNING then 0
        when OFFSET_END then @log.end_offset(*key)
        else offset
        end
      end

      def raw_headers(headers)
        headers&.flat_map { |name, value| value.is_a?(Array) ? value.flat_map { |v| [name.to_s, v] } : [name.to_s, value] }
      end

      def open!
        raise Errors::ConsumerClosedError, "consumer #{@id} is closed" if @closed

        self
      end
    end
  end
end
