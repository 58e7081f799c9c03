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
    # with it (#processed), in bulk before the next drain. What was fetched
    # for a partition and not handed out is never skipped: revoked, it is
    # dropped (the next owner starts at the committed offset); paused, seeked
    # or rewound, it is given back (#give_back): dropped, and librdkafka goes
    # back to it.
    class Inbox
      include Clock

      EMPTY = [].freeze
      # Items taken from the queue per drain, and the time that may take (ms).
      DRAIN_ITEMS = 2_000
      DRAIN_BUDGET = 50
      # At most this long (s) between two polls while buffered messages are handed out (see #keep_polling).
      KEEP_POLLING = 1.0

      # @param refused [#call] the KafkaError of an authentication failure not
      #   raised yet, or nil (the reader raises it instead of waiting on)
      def initialize(client:, rebalancer:, instrument:, keepalive_ms:, seek_timeout_ms:, refused: -> {})
        @client = client
        @refused = refused
        @auth_watch = Polling::AuthWatch.new
        @refused_error = nil
        @seek_timeout_ms = seek_timeout_ms
        @rebalancer = rebalancer
        @instrument = instrument
        @keepalive = keepalive_ms / 1000.0
        @poll_every = [@keepalive, KEEP_POLLING].min
        @polled_at = now
        @io = IO.for_fd(client.message_fd, autoclose: false) # the native client owns the fd
        @io_lock = Mutex.new # held while waiting: the fd is closed only once nobody waits on it
        @items = EMPTY
        @at = 0
        @done = [] # handed out and processed, offsets not stored yet
        @stopped = false
        @reader = nil
        @reader_lock = Mutex.new
        @idle = ConditionVariable.new
        @given_back = [] # #give_back calls from other threads, for the reader to carry out
      end

      # The next message, or nil when timeout_ms (nil: no limit) passed or #stop
      # was called.
      # (`while true`, not `loop`: a return from loop's block unwinds through
      # a C frame, a cost paid on every message.)
      def take(timeout_ms)
        deadline = timeout_ms && now + (timeout_ms / 1000.0)
        keep_polling
        while true # rubocop:disable Style/InfiniteLoop
          give_back_for_others unless @given_back.empty?
          while @at < @items.size && !@stopped
            item = @items[@at]
            @at += 1
            return item if item.is_a?(Message)

            control(item)
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
      def processed(message) = @done << message

      def processed_batch(messages)
        @client.store_offsets(messages, messages.size)
      end

      # Stores the offsets of what was processed (before a commit, a revoke, close).
      def store_processed
        return if @done.empty?

        @client.store_offsets(@done, @done.size)
        @done.clear
      end

      # Drops what was fetched, not handed out, for these [topic, partition] pairs.
      # @return [Hash{Array(String, Integer) => Integer}] each partition's first
      #   dropped offset (partitions with nothing dropped are left out)
      def drop(partitions)
        return {} if @at >= @items.size

        gone = partitions.to_h { |topic, partition| [[topic, partition], true] }
        firsts = {}
        @items = @items[@at..].reject do |item|
          next false unless item.is_a?(Message) && gone[pair = [item.topic, item.partition]]

          firsts[pair] ||= item.offset
        end
        @at = 0
        firsts
      end

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

        @reader_lock.synchronize do
          next seek_back(positions) unless @reader # nobody reads, and no read starts meanwhile

          @given_back << positions
          @client.wake_messages # a waiting reader has nothing buffered, but a seek must not wait for its next message
          nil
        end
      end

      # Ends the current read (each_message, each_batch, poll): its wait, and
      # every take after the current one; the next read starts afresh. What
      # was fetched and not handed out stays for that next read.
      # Safe from any thread, fiber or signal handler.
      def stop
        @stopped = true
        @client.wake_messages
      end

      def stopped? = @stopped

      # Serves the queue until librdkafka finished leaving the group (after
      # Native::Consumer#close_begin): rebalances answered, messages dropped.
      def serve_until_closed(deadline)
        until @client.consumer_closed?
          @client.consume(DRAIN_ITEMS, DRAIN_BUDGET).each { |item| control(item) unless item.is_a?(Message) } # messages: dropped
          break if now >= deadline

          wait(deadline) unless @client.consume_exhausted?
        end
      end

      # Runs the block as the consumer's only reader (one thread or fiber at a time).
      def reading
        @reader_lock.synchronize do
          busy = @reader && !@reader.equal?(Fiber.current)
          raise Errors::ConsumerStateError, "this consumer is already being read by another thread or fiber" if busy

          @stopped = false unless @reader # a new read; a nested one (poll inside each_message) keeps the stop
          @reader = Fiber.current
        end
        yield
      ensure
        @reader_lock.synchronize do
          @reader = nil if @reader.equal?(Fiber.current)
          @idle.broadcast
        end
      end

      def reading? = !@reader.nil?

      def reader?(fiber) = @reader.equal?(fiber)

      # Waits (at most seconds) for the reader to return. @return [Boolean] it did
      def wait_idle(seconds)
        deadline = now + seconds
        @reader_lock.synchronize do
          while @reader
            left = deadline - now
            return false if left <= 0

            @idle.wait(@reader_lock, left)
          end
        end
        true
      end

      # Waits are over for good; the native client may close the pipe after this.
      def shut = @io_lock.synchronize { @io = nil }

      private

      def seek_back(positions)
        dropped = drop(positions.map { |topic, partition| [topic, partition] })
        seeks = positions.filter_map do |topic, partition, offset|
          offset ||= dropped[[topic, partition]]
          [topic, partition, offset] if offset
        end
        return if seeks.empty?

        error, = Blocking.call { @client.seek(seeks, @seek_timeout_ms) }
        error
      end

      def give_back_for_others
        @reader_lock.synchronize { @given_back.slice!(0..) }.each do |positions|
          error = seek_back(positions)
          @instrument.call("error.occurred", type: "consumer.seek_error", error: KafkaError.from_tuple(error)) if error
        end
      end

      # Drains the queue into @items (what was left unread is kept first).
      # @return [Boolean] something came
      def refill
        return false unless @at >= @items.size

        store_processed
        @items = drain(DRAIN_ITEMS)
        @at = 0
        !@items.empty?
      end

      # A slow application can take long over what one drain buffered, while
      # librdkafka counts only polls of the queue for max.poll.interval.ms and
      # commits only stored offsets: now and then, store what was processed
      # and poll for one more item. A rebalance found there is answered at
      # once (what is buffered for partitions it gives up is dropped unread).
      def keep_polling
        return if @at >= @items.size || now - @polled_at < @poll_every

        store_processed
        drain(1).each do |item|
          next control(item) unless item.is_a?(Message)

          @items = @items[@at..] << item
          @at = 0
        end
      end

      def drain(max_items)
        @polled_at = now
        @client.consume(max_items, DRAIN_BUDGET)
      end

      def fill(batch, max_items)
        while @at < @items.size && batch.size < max_items
          item = @items[@at]
          @at += 1
          next batch << item if item.is_a?(Message)

          given_up = control(item)
          batch.reject! { |message| given_up.include?([message.topic, message.partition]) } unless given_up.empty?
        end
      end

      # @return [Array<Array(String, Integer)>] partitions given up (their
      #   messages not handed out yet are dropped)
      def control(item)
        case item.first
        when :rebalance
          store_processed # what was processed is committed before partitions go
          given_up = @rebalancer.call(*item.drop(1))
          drop(given_up)
          given_up
        when :error
          error = KafkaError.new(item[1], item[2], fatal: item[3])
          @refused_error = @auth_watch.observe(error) || @refused_error
          @instrument.call("error.occurred", type: "consumer.error", error: error)
          EMPTY
        when :eof # with enable.partition.eof: nothing more in the partition for now
          @instrument.call("consumer.partition_eof", topic: item[1], partition: item[2], offset: item[3])
          EMPTY
        else
          EMPTY
        end
      end

      # Until the deadline, and at most half of max.poll.interval.ms: the
      # drain after it counts as polling (librdkafka's own test).
      # Nothing to hand out, and the broker refused the consumer's credentials
      # (reported on this queue, or on the main queue: see Consumer#new_auth_failure).
      def raise_refused
        error = @refused_error || @refused.call
        @refused_error = nil
        raise Errors::AuthenticationError, error if error
      end

      def wait(deadline)
        return if @client.consume_exhausted? # the pipe is empty but events are left: no wake-up will come

        left = deadline ? [deadline - now, @keepalive].min : @keepalive
        @io_lock.synchronize { @io&.wait_readable(left) if left.positive? && !@stopped }
      end
    end
  end
end
