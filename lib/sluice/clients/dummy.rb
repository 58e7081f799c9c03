# frozen_string_literal: true

require "zlib"

module Sluice
  module Clients
    # An in-memory stand-in for the native producer client (WaterDrop's
    # Clients::Dummy): `config.client_class = Sluice::Clients::Dummy`. It
    # accepts every valid message and drops it; no broker is contacted.
    #
    # Only the native client is replaced: the producer above it (middleware,
    # validation, variants, buffering, transactions, handles, events) is the
    # real one. Messages are checked by the native client's own validation
    # (the same MessageInvalidError, word for word). It refuses, as a real
    # producer does before any broker is asked, a message over
    # message.max.bytes (ProduceError :msg_size_too_large; key, value and
    # header names and values counted, not the headers' framing), a partition
    # past a count declared in #partition_counts (:unknown_partition: a real
    # producer learns the count from the broker) and a variant's setting that
    # is not topic-level (librdkafka's own check). The producer's own
    # librdkafka properties are not checked: no librdkafka handle is built.
    #
    # Each message is delivered as it is produced: its handle resolves before
    # produce_async returns, with its partition (the message's, else CRC32 of
    # partition_key or key over #partition_counts, as librdkafka's default
    # partitioner, else 0) and an offset counted per topic-partition from 0.
    # Its acknowledgement goes through the poller like a real delivery
    # report's, so `message.acknowledged` listeners see it; #flush waits for it.
    class Dummy
      # The native client's message checks, without a librdkafka handle (an
      # allocated, never started native client validates and owns nothing).
      VALIDATOR = Native::Producer.allocate
      NO_PARTITION = -1 # RD_KAFKA_PARTITION_UA
      # librdkafka's message.max.bytes default.
      MESSAGE_MAX_BYTES = 1_000_000
      # librdkafka's codes for what it refuses before a broker is asked.
      MSG_SIZE_TOO_LARGE = KafkaError.number_for(:msg_size_too_large)
      # (see MSG_SIZE_TOO_LARGE)
      UNKNOWN_PARTITION = KafkaError.number_for(:unknown_partition)

      # Partitions per topic, for messages partitioned by key, and refusing a
      # partition past the count: `client.partition_counts["events"] = 3`
      # (a topic not declared has one, and any explicit partition is taken).
      attr_reader :partition_counts
      # The librdkafka properties the producer was built with.
      attr_reader :settings

      # @param kafka_pairs [Array<Array(String, String)>] the producer's librdkafka properties (kept, not checked)
      def initialize(kafka_pairs)
        @settings = kafka_pairs.to_h.freeze
        @max_bytes = Integer(@settings.fetch("message.max.bytes", MESSAGE_MAX_BYTES), exception: false) || MESSAGE_MAX_BYTES
        @partition_counts = Hash.new(1)
        @lock = Mutex.new
        @drained = ConditionVariable.new
        @offsets = Hash.new(0) # [topic, partition] => next offset
        @acks = [] # resolved handles whose acknowledgement the poller has not drained yet
        @topic_configs = 0
        @lines_delivered = 0
        @pid = Process.pid
        @reader, @writer = IO.pipe # the wake-up of both polling modes; closed by #destroy
        @destroyed = false
      end

      # A name in librdkafka's handle-name form (client.id, default "rdkafka",
      # then "#dummy-" and the object id), unique per client, for logs.
      def name = "#{@settings.fetch("client.id", "rdkafka")}#dummy-#{object_id}"

      # --- producing (Native::Producer's contract) --------------------------

      # The native client's own checks: the same MessageInvalidError, word for word.
      # @raise [Errors::MessageInvalidError]
      def validate(message) = VALIDATOR.validate(message)

      # What #produce builds each handle from: the producer's DeliveryHandle
      # class, and the notifier that wakes the threads waiting on handles.
      def handles(klass, notifier)
        @handle_class = klass
        @notifier = notifier
        nil
      end

      # Delivers the message now: its handle is resolved before this returns.
      # @return [Delivery::Handle], or false: the message has a partition_key and
      #   no partition (the producer resolves the key, then calls again)
      def produce(message, partition = nil, _topic_config_id = nil)
        open!
        validate(message)
        return false if unplaced?(message, partition)

        refusal(message, partition) || deliver(message, partition)
      end

      # Delivers the messages now, in order, once every one passed validation.
      # @return [Array(Array<Delivery::Handle>, nil)], or false as #produce
      def produce_many(messages, partitions = nil, _topic_config_id = nil)
        open!
        messages.each { |message| validate(message) }
        return false if partitions.nil? && messages.any? { |message| unplaced?(message, nil) }

        handles = []
        messages.each_with_index do |message, i|
          error = refusal(message, partitions&.at(i))
          return [handles, error] if error # as the native client: stops at the first one refused

          handles << deliver(message, partitions&.at(i))
        end
        [handles, nil]
      end

      # Delivers data's records as #produce delivers messages, one message a
      # record (Producer#produce_lines; the native client's contract): its
      # payload the record without its delimiter, an empty record no message
      # but its line number pushed to empties. Stops at max messages, or at
      # the first record refused (too large, a partition past the count).
      # @return [Array(Integer, Integer, Integer, Integer, nil)] the offset and
      #   line number of the record it stopped at, the messages delivered, and
      #   the refused record's error code (nil: none was)
      def produce_lines(topic, data, offset, delimiter, partition, line, max, empties, _topic_config_id = nil) # rubocop:disable Metrics/ParameterLists -- the native client's
        open!
        bytes = data.b
        sent = 0
        while offset < bytes.bytesize && sent < max
          ends = bytes.index(delimiter.b, offset) # byte offsets: bytes is binary
          record = bytes.byteslice(offset...(ends || bytes.bytesize))
          if record.empty?
            empties << line
          else
            code = line_message(topic, record, partition)
            return [offset, line, sent, code] if code

            sent += 1
          end
          offset = ends ? ends + delimiter.bytesize : bytes.bytesize
          line += 1
        end
        [offset, line, sent, nil]
      end

      # #produce_lines' messages delivered so far (all of them: each is
      # delivered as it is produced), and those that were not (none).
      # @return [Array(Integer, Array)]
      def line_reports = @lock.synchronize { [@lines_delivered, []] }

      # A variant's topic settings, checked as librdkafka checks them (not
      # against the producer's own settings: no handle).
      # @return [Integer] the id #produce takes (1, 2, ...)
      # @raise [Errors::ConfigurationInvalidError] a setting that is unknown, not topic-level, or a value librdkafka refuses
      def add_topic_config(pairs)
        Native.check_topic_config(pairs)
        @lock.synchronize { @topic_configs += 1 }
      end

      # The topic's partition count as metadata would give it (default 1).
      # @return [Array(Integer, Integer)] no error, and #partition_counts' count
      def partition_count(topic, _timeout_ms) = [0, @partition_counts[topic.to_s]]

      # librdkafka's consistent partitioner (its default, consistent_random, for a key).
      def partition_for(key, count) = key.empty? || count <= 0 ? NO_PARTITION : Zlib.crc32(key) % count

      # Waits until the poller has taken every acknowledgement.
      # @return [Boolean] false when timeout_ms (-1: none) passed first
      def flush(timeout_ms)
        open!
        deadline = timeout_ms.negative? ? nil : now + (timeout_ms / 1000.0)
        @lock.synchronize do
          until @acks.empty?
            left = deadline && deadline - now
            return false if left && left <= 0

            @drained.wait(@lock, left)
          end
        end
        true
      end

      # Acknowledgements the poller has not taken yet: what close waits to see reach 0
      # (for the native client, the messages librdkafka still holds).
      def outq_len = @lock.synchronize { @acks.size }
      alias queue_length outq_len

      # Every message is delivered at once: nothing is ever in flight.
      def inflight_count = 0
      # No handle is left without a delivery when the client is destroyed: always empty.
      def take_inflight = []
      # Nothing is queued or in flight to drop: 0, librdkafka's "no error".
      def purge = 0
      # Always 0: no broker ever refuses this client, so no deliveries need to prove it was accepted.
      def progress = 0
      # Never fatal: nil (the native client's [code, reason] once librdkafka hits a fatal error).
      def fatal_error = nil

      # --- transactions (the producer's Ruby side keeps their rules) -------

      # Succeeds at once: nil, librdkafka's "no error".
      def init_transactions(_timeout_ms) = nil

      # Succeeds at once: nil, librdkafka's "no error".
      def begin_transaction = @lock.synchronize { @sent_offsets = [] } && nil

      # Succeeds at once: nil, librdkafka's "no error" (Buffered keeps the transaction's messages here).
      # The offsets the transaction sent are committed for their consumers now, as the broker commits them.
      def commit_transaction(_timeout_ms)
        sent = @lock.synchronize { @sent_offsets.tap { @sent_offsets = nil } }
        sent&.each { |consumer, offsets| consumer.commit_in_transaction(offsets) }
        nil
      end

      # Succeeds at once: nil, librdkafka's "no error" (Buffered drops the transaction's messages here).
      # The offsets it sent are dropped: nothing is committed for their consumers.
      def abort_transaction(_timeout_ms) = @lock.synchronize { @sent_offsets = nil }

      # Accepts the consumer's offsets: nil, librdkafka's "no error". A
      # Sluice::Testing::Consumer's are committed when the transaction commits;
      # another consumer's (a real one's client) are dropped.
      def send_offsets_to_transaction(consumer, offsets, _timeout_ms)
        @lock.synchronize { @sent_offsets&.push([consumer, offsets]) } if consumer.respond_to?(:commit_in_transaction)
        nil
      end

      # --- the poller's contract -------------------------------------------

      # The pipe the poller waits on: written when acknowledgements are waiting.
      def wakeup_enable
        open!
        @reader.fileno
      end

      # The pipe lives until #destroy: :thread mode waits on it too.
      def wakeup_disable = nil

      # The pipe's read end the poller watches; nil once destroyed.
      def wakeup_fd = @destroyed ? nil : @reader.fileno

      # Writes a wake-up to the pipe, as librdkafka does for its queue (the poller
      # re-arms a client this way).
      def wakeup_signal = @lock.synchronize { signal }

      # Makes a #wait_events blocked in another thread return now (by a wake-up).
      def interrupt_wait = wakeup_signal

      # Hands the poller every acknowledgement waiting, and wakes #flush.
      # @return [Array] the poller's flat quads: [handle, nil, nil, 0] per
      #   acknowledgement when acks (someone listens to message.acknowledged)
      def drain(_budget_ms, acks)
        taken = @lock.synchronize do
          empty_pipe
          @acks.slice!(0..).tap { @drained.broadcast }
        end
        acks ? taken.flat_map { |handle| [handle, nil, nil, 0] } : nil
      end

      # The last drain ran out of budget? Never: it takes everything.
      def exhausted? = false

      # :thread mode's wait: acknowledgements waiting, or a wake-up.
      def wait_events(timeout_ms)
        return true unless @lock.synchronize { @acks.empty? }

        !IO.select([@reader], nil, nil, timeout_ms / 1000.0).nil?
      rescue IOError # closed meanwhile
        false
      end

      # Accepted and ignored (no broker to authenticate to): nil, no error.
      def oauthbearer_set_token(_token, _lifetime_ms, _principal_name, _extensions) = nil

      # Accepted and ignored (no broker to authenticate to): nil.
      def oauthbearer_set_token_failure(_reason) = nil

      # Closes the wake-up pipe; later calls that produce or flush raise
      # ProducerClosedError. Takes the native client's optional timeout, and
      # has nothing to wait for. A second call does nothing.
      def destroy(*)
        @lock.synchronize do
          @destroyed = true
          [@reader, @writer].each(&:close) unless @reader.closed?
        end
        nil
      end

      # Destroyed, or built in another process (see #forked?).
      def closed? = @destroyed || forked?

      # Built in another process: producing or flushing here raises ForkedProcessError.
      def forked? = @pid != Process.pid

      # Shows whether the client is closed (destroyed, or built in another process).
      def inspect = "#<#{self.class.name} #{closed? ? "closed" : "open"}>"

      private

      # librdkafka's error code for what it refuses before a broker is asked, or nil.
      def refusal(message, partition)
        return MSG_SIZE_TOO_LARGE if size(message) > @max_bytes

        partition ||= message[:partition]
        topic = message[:topic].to_s
        UNKNOWN_PARTITION if partition && partition != NO_PARTITION && @partition_counts.key?(topic) && partition >= @partition_counts[topic]
      end

      def size(message)
        headers = message[:headers] || {}
        header_bytes = headers.sum { |name, value| name.to_s.bytesize + Array(value).sum { |v| v.to_s.bytesize } }
        message[:payload].to_s.bytesize + message[:key].to_s.bytesize + header_bytes
      end

      # What the real client does about a partition_key without a partition: asks Ruby.
      def unplaced?(message, partition)
        partition.nil? && [nil, NO_PARTITION].include?(message[:partition]) && !message[:partition_key].nil?
      end

      def open!
        raise Errors::ForkedProcessError, "this producer was created in process #{@pid} and cannot be used in a forked process" if forked?
        raise Errors::ProducerClosedError, "producer is closed" if @destroyed
      end

      # A record of #produce_lines as a message: delivered, or the code it was refused with.
      def line_message(topic, record, partition)
        message = { topic: topic, payload: record }
        message[:partition] = partition unless partition == NO_PARTITION
        validate(message)
        code = refusal(message, nil)
        return code if code

        deliver(message, nil)
        @lock.synchronize { @lines_delivered += 1 }
        nil
      end

      def deliver(message, partition)
        topic = message[:topic].to_s
        partition = place(message, topic, partition)
        handle = @handle_class.new(@notifier, topic, message[:label])
        @lock.synchronize do
          offset = @offsets[[topic, partition]]
          @offsets[[topic, partition]] = offset + 1
          handle.resolve(partition, offset, 0)
          kept(message, topic, handle)
          signal if @acks.empty?
          @acks << handle
        end
        @notifier&.notify
        handle
      end

      # Under the lock, once the message has its place: Buffered keeps it.
      def kept(_message, _topic, _handle) = nil

      def place(message, topic, partition)
        partition ||= message[:partition]
        return partition if partition && partition != NO_PARTITION

        key = message[:key]
        key.nil? || key.empty? ? 0 : partition_for(key, @partition_counts[topic])
      end

      def signal
        @writer.write_nonblock("1", exception: false)
      rescue IOError
        nil # closed by destroy meanwhile
      end

      def empty_pipe
        loop { break unless @reader.read_nonblock(64, exception: false).is_a?(String) }
      rescue IOError
        nil
      end

      def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end
