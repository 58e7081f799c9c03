# frozen_string_literal: true

module Sluice
  # A member of a share group (KIP-932, Kafka 4.2 and later): the members of
  # one group share the records of the same partitions, each record handed to
  # one member at a time under a lock, then accepted, released (delivered
  # again, with #delivery_count one more) or rejected (never again). Ordering
  # is given up; work is shared beyond the partition count. Needs librdkafka
  # 2.15.0, whose share consumer is a preview (docs/SHARE_GROUPS.md).
  #
  # @example
  #   consumer = Sluice::ShareConsumer.new do |config|
  #     config.kafka = { "bootstrap.servers": "127.0.0.1:9092", "group.id": "mailers" }
  #   end
  #   consumer.subscribe("emails")
  #   consumer.each_message { |record| deliver(record.payload) } # returns: accepted; raises: released
  #
  # No thread of its own, and nothing for the shared poller: librdkafka gives
  # a share consumer no queue or pipe to wait on, nor a wakeup. The reader
  # waits in librdkafka's poll without the GVL, one Config#poll_slice (100 ms)
  # at a time, so #stop, #close and an interrupt take effect within a slice;
  # under a Fiber.scheduler it polls without waiting and sleeps between
  # polls instead, so the fiber yields. One handle, one thread at a time
  # (librdkafka's rule): calls from other threads wait for the reader's slice.
  class ShareConsumer
    include Shared::Clock

    # @return [Monitor] where the consumer's events go (share_consumer.*, error.occurred)
    attr_reader :monitor

    # @yieldparam config [ShareConsumer::Config]
    # @raise [Errors::ShareConsumerUnavailableError] librdkafka before 2.15.0
    # @raise [Errors::ShareConsumerConfigError] a consumer-group-only setting
    # @raise [Errors::ConfigurationInvalidError]
    def initialize
      unless Native::ShareConsumer.supported?
        raise Errors::ShareConsumerUnavailableError, "the share consumer needs librdkafka 2.15.0 or later; this sluice is linked " \
                                                     "with #{Native.librdkafka_version} (build with SLUICE_LIBRDKAFKA_VERSION=2.15.0)"
      end
      config = Config.new
      yield config if block_given?
      @config = config.validate!.freeze
      @monitor = config.monitor || Monitor.new(logger: config.logger)
      @native = Shared::Secrets.scrubbing(config.kafka) { Native::ShareConsumer.new(config.native_pairs) }
      @acks = Acknowledgements.new(@native)
      @lock = Mutex.new
      @stopping = false
      @closing = false
      @closed = false
    end

    # Joins the share group for these topics (replacing an earlier subscription).
    # Records written before the group's first fetch are read only when the
    # group config share.auto.offset.reset is earliest (Admin#alter_configs(group:)).
    # @param topics [Array<String, Symbol>]
    # @return [nil]
    # @raise [Errors::ConsumerError]
    # @raise [Errors::ConsumerClosedError]
    def subscribe(*topics)
      topics = topics.flatten.map(&:to_s)
      raise ArgumentError, "subscribe needs at least one topic" if topics.empty? || topics.any?(&:empty?)

      error = synchronize { @native.subscribe(topics) }
      raise Errors::ConsumerError.new("subscribe", KafkaError.from_tuple(error)) if error

      nil
    end

    # One batch of acquired records (at most max.poll.records, a soft bound
    # in librdkafka's preview), waiting up to timeout_ms for one.
    # In implicit mode the last batch's records still unacknowledged are accepted first.
    # @param timeout_ms [Integer]
    # @return [Array<Record>] empty when none came in time
    # @raise [Errors::UnacknowledgedRecordsError] explicit mode, the last batch not all acknowledged
    # @raise [Errors::ShareGroupsUnsupportedError] the brokers have no share groups
    # @raise [Errors::ConsumerError]
    # @raise [Errors::ConsumerClosedError] closed, or a close of another thread began (within a poll_slice)
    def poll(timeout_ms = 0)
      deadline = now + (timeout_ms / 1000.0)
      loop do
        # A Mutex is not fair: taken again at once, the lock would keep a close of another thread out for the whole wait.
        raise Errors::ConsumerClosedError, "share consumer is closed" if @closing

        records = synchronize { poll_slice([ms_until(deadline), @config.poll_slice].min) }
        return records if !records.empty? || now >= deadline
      end
    end

    # Reads until #stop or #close, one batch at a time. Implicit mode: a
    # block that returns accepts the batch's records it did not acknowledge;
    # one that raises releases them, and the exception ends the loop (each
    # release delivers a record again, until the group's
    # share.delivery.count.limit, 5 by default: then the broker archives it,
    # delivered to no one). Explicit mode: the block acknowledges each.
    # @yieldparam records [Array<Record>]
    # @return [nil]
    def each_batch
      raise ArgumentError, "each_batch needs a block" unless block_given?

      until @stopping || @closed
        records = next_batch
        handling { yield records } unless records.empty?
      end
      nil
    ensure
      @stopping = false
    end

    # Reads until #stop or #close, one record at a time (#each_batch: the
    # acknowledgement per record, in implicit mode a raise releasing the record and the rest of its batch).
    # A record librdkafka reports an error for (it acknowledged it itself) is an error.occurred event.
    # @yieldparam record [Record]
    # @return [nil]
    def each_message
      raise ArgumentError, "each_message needs a block" unless block_given?

      each_batch do |records|
        records.each do |record|
          next report_record_error(record) if record.error_tuple

          yield record
          accept(record) if implicit? && @acks.pending?(record)
        end
      end
    end

    # @param record [Record] one of the last batch's
    # @return [nil]
    # @raise [Errors::ConsumerStateError] not a record waiting for its acknowledgement
    def accept(record) = acknowledge(record, :accept)

    # Delivers the record again (to any member), with delivery_count one more.
    # @param record [Record]
    # @return [nil]
    def release(record) = acknowledge(record, :release)

    # Never delivers the record again (the broker archives it).
    # @param record [Record]
    # @return [nil]
    def reject(record) = acknowledge(record, :reject)

    # @param record [Record]
    # @param type [Symbol] :accept, :release or :reject
    # @return [nil]
    def acknowledge(record, type)
      synchronize { @acks.acknowledge(record, type) }
      nil
    end

    # Sends the acknowledgements made so far and waits for the brokers' answers
    # (they also go out with the next poll). Each partition's outcome is also
    # a share_consumer.acknowledgements_committed event.
    # @param timeout_ms [Integer]
    # @return [Array<Hash>] { topic:, partition:, error: KafkaError or nil } per partition
    # @raise [Errors::ConsumerError] the call itself was refused
    def commit_sync(timeout_ms = @config.max_wait_timeout)
      error, partitions = synchronize { @native.commit_sync(Integer(timeout_ms)).tap { announce_commits } }
      raise Errors::ConsumerError.new("commit_sync", KafkaError.from_tuple(error)) if error

      partitions.map { |topic, partition, _, code| { topic: topic, partition: partition, error: code.zero? ? nil : KafkaError.new(code) } }
    end

    # Sends the acknowledgements made so far without waiting: each partition's
    # outcome becomes a share_consumer.acknowledgements_committed event on the
    # reader's thread, at its next poll or commit (or at close).
    # @return [nil]
    def commit_async
      error = synchronize { @native.commit_async }
      raise Errors::ConsumerError.new("commit_async", KafkaError.from_tuple(error)) if error

      nil
    end

    # Ends each_message / each_batch after the current block, within a
    # poll_slice. Safe from any thread and from a signal trap (it only sets a flag).
    # @return [nil]
    def stop
      @stopping = true
      nil
    end

    # Leaves the share group: librdkafka sends the acknowledgements made and
    # the brokers release the records acquired but not acknowledged. Its close
    # takes no timeout (it is bounded by socket.timeout.ms, 60 s), so it runs
    # in a native thread of its own, and close waits for it at most timeout_ms:
    # after that, false, and the thread finishes the close (and frees the
    # handle) on its own. A #commit_sync of another thread holds the handle
    # (librdkafka allows one call at a time) up to its own timeout: close
    # waits for it within timeout_ms too, and past that returns false, a
    # thread of ours closing once the commit is answered. Not from a trap
    # (#stop there).
    # @param timeout_ms [Integer]
    # @return [Boolean] whether the group was left within timeout_ms (true too when closed before)
    def close(timeout_ms = @config.max_wait_timeout)
      deadline = now + (Integer(timeout_ms) / 1000.0)
      @stopping = true
      @closing = true
      return close_until(deadline) if @lock.owned?

      # Not the lock's own wait: that one has no bound.
      closer = Thread.new { close_late_reported(deadline) }
      closer.name = "sluice.share_close##{@config.id}"
      closer.report_on_exception = false # raised to the caller by #value, or an event once it has gone
      closer.join(ms_until(deadline) / 1000.0) ? closer.value : false
    end

    # @return [Boolean]
    def closed? = @closed

    # @return [String]
    def inspect = "#<#{self.class.name} id=#{@config.id.inspect} acknowledgement=#{@config.acknowledgement} #{@closed ? "closed" : "open"}>"

    private

    def implicit? = @config.acknowledgement == :implicit

    # The close, once the handle is free: started, waited for until deadline, reported.
    def close_until(deadline)
      started = synchronize(open: false) do
        next false if @closed

        @closed = true
        instrument("share_consumer.closing")
        @native.close_start
      end
      return true unless started

      result = @native.close_wait(ms_until(deadline))
      announce_commits
      instrument("share_consumer.closed", within_timeout: result != false, error: result && KafkaError.from_tuple(result))
      result != false
    end

    # #close_until on the closer thread: a failure after #close returned false
    # reaches nobody's stack, so it is an error.occurred event.
    def close_late_reported(deadline)
      close_until(deadline)
    rescue StandardError => e
      instrument("error.occurred", type: "share_consumer.close", error: e) if now > deadline
      raise
    end

    # A batch for the reading loop; empty after a slice without one, or once closed.
    def next_batch
      synchronize(open: false) { @closed ? [] : poll_slice(@config.poll_slice) }
    end

    # With the lock held: the last batch settled, one wait of at most slice_ms.
    def poll_slice(slice_ms)
      raise Errors::ConsumerClosedError, "share consumer is closed" if @closed

      settle_last_batch
      error, rows = wait(slice_ms)
      announce_commits
      unsupported!
      raise Errors::ConsumerError.new("poll", KafkaError.from_tuple(error)) if error

      rows.map { |row| Record.new(*row) }.tap { |records| @acks.track(records) }
    end

    def settle_last_batch
      return if @acks.empty?
      raise Errors::UnacknowledgedRecordsError, @acks.pending unless implicit?

      @acks.acknowledge_all(:accept)
    end

    # Under a fiber scheduler librdkafka's poll would hold the thread: a poll that
    # does not wait, then a sleep the scheduler serves (other fibers run).
    def wait(slice_ms)
      return @native.poll(slice_ms) unless Fiber.scheduler && !Fiber.current.blocking?

      error, rows = @native.poll(0)
      sleep(FIBER_WAIT) if error.nil? && rows.empty? && slice_ms.positive?
      [error, rows]
    end

    # How long a fiber sleeps between polls that found nothing (s).
    FIBER_WAIT = 0.01
    private_constant :FIBER_WAIT

    def unsupported!
      line = @native.unsupported or return

      raise Errors::ShareGroupsUnsupportedError.new("joining the share group (Kafka 4.2 or later, with share groups on)",
                                                    KafkaError.new(KafkaError.number_for(:unsupported_feature), line))
    end

    def handling
      yield
      synchronize { @acks.acknowledge_all(:accept) } if implicit?
    rescue Exception # rubocop:disable Lint/RescueException -- a kill or an interrupt too: hand the records back now, not after their lock
      release_left if implicit?
      raise
    end

    def release_left
      synchronize(open: false) do
        next if @closed || @acks.empty?

        @acks.acknowledge_all(:release)
        @native.commit_async
      end
    rescue Errors::BaseError
      nil # the records come back when their lock ends
    end

    def announce_commits
      @native.take_commits.each do |topic, partition, code, offsets|
        instrument("share_consumer.acknowledgements_committed",
                   topic: topic, partition: partition, offsets: offsets, error: code.zero? ? nil : KafkaError.new(code))
      end
    end

    def report_record_error(record)
      instrument("error.occurred", type: "share_consumer.record_error", error: record.error, topic: record.topic,
                                   partition: record.partition, offset: record.offset)
    end

    def synchronize(open: true, &block)
      raise Errors::ConsumerClosedError, "share consumer is closed" if open && @closed

      @lock.owned? ? yield : @lock.synchronize(&block)
    end

    def instrument(name, payload = {}) = @monitor.instrument(name, { consumer_id: @config.id }.merge!(payload))
  end
end
