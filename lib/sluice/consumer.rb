# frozen_string_literal: true

module Sluice
  # A Kafka consumer-group member over librdkafka.
  #
  # @example
  #   consumer = Sluice::Consumer.new do |config|
  #     config.kafka = { "bootstrap.servers": "127.0.0.1:9092", "group.id": "billing" }
  #   end
  #   consumer.subscribe("orders")
  #   consumer.each_message { |message| bill(message.payload) }
  #
  # No thread of its own: the application's thread or fiber reads the
  # messages, waiting on the consumer queue's pipe through Ruby's IO (under a
  # fiber scheduler the fiber yields), while the consumer's background events
  # (errors, statistics, OAuth refresh, commit results) are served by the
  # shared poller (:fd), or by one thread of its own (:thread).
  #
  # At least once: each_message stores a message's offset after its block
  # returned, each_batch a batch's; librdkafka commits stored offsets in the
  # background and close commits them. One reader (thread or fiber) at a time;
  # each_message(concurrency: N) runs its blocks on N threads of its own, or
  # on N fibers of the caller's Fiber.scheduler (ParallelReading), the reader
  # still the only one to read.
  # Where a fetched message is until then, and why none is skipped: the
  # hand-off invariant at the top of Consumer::Inbox.
  class Consumer
    include Shared::Clock
    include Lifecycle
    include Arguments
    include Rendering
    include Failure::Reading

    # Builds the consumer and connects it (it reads nothing before #subscribe
    # or #assign): the block fills in its settings, then validated and frozen.
    # @yieldparam config [Consumer::Config]
    # @raise [Errors::ConfigurationInvalidError] (also for a producer property,
    #   or a missing group.id)
    # @example
    #   consumer = Sluice::Consumer.new do |config|
    #     config.kafka = { "bootstrap.servers": "127.0.0.1:9092", "group.id": "billing", "auto.offset.reset": "earliest" }
    #   end
    def initialize(&)
      configure(Config.new, &)
      @poll_store = @config.poll_store
      @life.open
    end

    # Joins the group for these topics (replacing an earlier subscription).
    # @param topics [Array<String, Symbol>] one or more topic names
    # @return [nil]
    # @raise [ArgumentError] no topic, or one that is not a non-empty String or Symbol
    # @raise [Errors::ConsumerError]
    # @raise [Errors::ConsumerClosedError]
    def subscribe(*topics)
      topics = topics.flatten
      raise ArgumentError, "subscribe needs at least one topic" if topics.empty?

      topics = topics.map { |topic| topic_name(topic) }

      check(open_client.subscribe(topics), "subscribe")
      @subscription = topics.map(&:to_s).uniq # each_message(retry_topics:) adds theirs
      nil
    end

    # Leaves the group's topics: the assignment is given up.
    # @return [nil]
    # @raise [Errors::ConsumerError]
    def unsubscribe = check(open_client.unsubscribe, "unsubscribe") && (@subscription = nil)

    # Reads outside a group: { topic => [partition, ...] } from the committed
    # (or auto.offset.reset) position, or { topic => { partition => offset } }.
    # Replaces the assignment, as rdkafka-ruby's does: what was processed is
    # stored first, and what was fetched and not handed out yet is dropped,
    # so the next message is the new assignment's (a partition assigned
    # again starts at its new offset, not with what was buffered from the
    # old one). Called from another thread while one reads, the reader
    # carries it out before it hands out anything else, and reports a
    # failure as `error.occurred` (type consumer.assign_error).
    # @param assignments [Hash{String => Array<Integer>, Hash{Integer => Integer}}]
    # @return [nil]
    # @raise [ArgumentError] not such a Hash
    # @raise [Errors::ConsumerError]
    # @example
    #   consumer.assign("orders" => [0, 1])            # from the committed offsets
    #   consumer.assign("orders" => { 0 => 1_000 })    # partition 0 from offset 1000
    def assign(assignments)
      unless assignments.is_a?(Hash)
        raise ArgumentError, "assign takes { topic => [partition, ...] } or { topic => { partition => offset } }, got #{assignments.inspect}"
      end

      pairs = assignments.flat_map do |topic, partitions|
        topic = topic_name(topic)
        if partitions.is_a?(Hash)
          partitions.map { |p, offset| [topic, partition_number(p), offset_number(offset)] }
        else
          Array(partitions).map { |p| [topic, partition_number(p)] }
        end
      end
      open_client
      error = @inbox.reassign(pairs)
      raise Errors::ConsumerError.new("assign", KafkaError.from_tuple(error)) if error
    end

    # Yields every message until #stop or #close; stores its offset once the
    # block finished (`next` finishes it). When the block does not finish
    # (raise, break, return, throw), that offset is not stored and the
    # partition goes back to that message: it is handed out again, here or
    # to the partition's next owner.
    #
    # With concurrency above 1, up to that many blocks run at once, in the
    # order `ordering` keeps (README, "Parallel consumption"): each on a
    # thread of the read's own or, when each_message is called from a
    # non-blocking fiber under a Fiber.scheduler (inside Async), on a fiber
    # of that scheduler in the calling thread. A partition's offset is stored
    # only below its lowest message whose block has not finished, whatever
    # order blocks finish in. At most max_buffered messages (and
    # max_buffered_bytes of keys and payloads) are taken and not finished at
    # once. A block that raises stops the read: no block starts after it,
    # those running are waited for (at most finish_within ms) and stored,
    # what did not finish is handed out again, and the error is raised here.
    # Blocks still running when the read ends (past finish_within, or an
    # exception in the reader: Timeout, Thread#raise, Async's Task#stop) are
    # ended: a thread is killed; a fiber gets Consumer::Workers::Stop raised
    # where it waits (Consumer::FiberPool), its ensure clauses run. break,
    # return and throw cannot leave a block running on another thread or
    # fiber: use #stop.
    # @param concurrency [Integer] blocks at once (1: in the calling thread, one after another)
    # @param ordering [Symbol] :key (each key's messages in order; keyless ones in
    #   their partition's order), :partition or :none
    # @param max_buffered [Integer] messages taken and not finished, at most
    # @param max_buffered_bytes [Integer] their keys' and payloads' bytes, at most
    #   (a larger message still goes when it is the only one)
    # @param finish_within [Numeric] ms a stop, an error or a revocation waits
    #   for running blocks before leaving them (their offsets unstored)
    # @param retries [Hash, nil] { attempts: 3, backoff: 0.1..30.0 }: a block
    #   that raised (a StandardError) runs again for the same message, up to
    #   attempts runs in all, after an exponential, jittered wait within backoff
    #   (seconds) that #stop and close cut short (each_message then returns nil,
    #   the message handed out again). It runs in the key's lane: the key's later
    #   messages wait, other keys go on, no offset passes it (docs/FAILURES.md)
    # @param dead_letter [String, Hash, nil] the topic, or { topic:, producer:,
    #   partitioner: :same | :key | ->(message, partition_count) }: after the last
    #   attempt the message goes there with its key, payload, headers and
    #   timestamp, and source_topic, source_partition, source_offset,
    #   source_consumer_group, source_attempts, error_class and error_message
    #   headers; its offset is stored once that is acknowledged (a transactional
    #   producer: committed in the same transaction; concurrency 1 only).
    #   Without producer:, one made from the consumer's settings
    # @param retry_topics [Array<Numeric>, nil] delays (s, ascending), with
    #   dead_letter:: a message that failed goes to "<topic>.retry.<delay>s"
    #   (the next one after a retry topic, dead_letter after the last), with
    #   a retry_due header; its offset is stored once that is acknowledged. A
    #   retry topic's message not due yet pauses its partition until it is.
    #   The retry topics of topics subscribed by name are subscribed too; they
    #   must exist (Admin#create_retry_topics). Per-key order does not hold
    #   across them (docs/FAILURES.md)
    # @yieldparam message [Message]
    # @return [nil] once stopped
    # @raise [ArgumentError] a setting out of range
    # @raise [Errors::ConsumerClosedError]
    # @raise [Errors::ConsumerStateError] another thread or fiber is reading this consumer
    # @raise [Errors::AuthenticationError] the brokers refuse the consumer's credentials or TLS
    # @raise [Errors::BaseError] a dead letter that could not be produced (nothing stored)
    # @example
    #   consumer.subscribe("orders")
    #   consumer.each_message do |message|
    #     puts "#{message.topic}/#{message.partition}@#{message.offset}: #{message.payload}"
    #     consumer.stop if message.payload == "last"
    #   end
    # @example 64 at once, each key's messages in order
    #   consumer.each_message(concurrency: 64, ordering: :key) { |message| Billing.charge(message.key, message.payload) }
    # @example Three attempts, then the dead-letter topic
    #   consumer.each_message(retries: { attempts: 3, backoff: 0.5..30.0 }, dead_letter: "orders.dlq") { |message| bill(message) }
    # @example Again after 5 s, 1 min and 10 min, through retry topics, then the dead-letter topic
    #   consumer.each_message(retry_topics: [5, 60, 600], dead_letter: "orders.dlq") { |message| bill(message) }
    def each_message(concurrency: 1, ordering: :key, max_buffered: nil, max_buffered_bytes: 64 << 20, finish_within: 30_000,
                     retries: nil, dead_letter: nil, retry_topics: nil, &block)
      settings = Parallelism.new(concurrency: concurrency, ordering: ordering, max_buffered: max_buffered,
                                 max_buffered_bytes: max_buffered_bytes, finish_within: finish_within)
      policy = failure_policy(retries, dead_letter, settings.parallel?, retry_topics)
      return each_message_in_parallel(settings, policy, &(policy ? policy.wrap(block) : block)) if settings.parallel?

      open_client
      pauses = retry_pauses(policy, nil)
      @inbox.reading do
        while (message = pauses ? take_due(pauses) : @inbox.take(nil))
          next if pauses&.take_back?(message)

          finished = false
          begin
            policy ? policy.run(message, [message], &block) : yield(message)
            finished = true
          ensure
            rewind([message]) unless finished
          end
          @inbox.processed(message)
        end
      end
    rescue Failure::Abandoned
      nil
    ensure
      pauses&.resume_all
      policy&.close
      after_reading
    end

    # Yields batches of up to max_items messages (waiting up to max_wait ms
    # for a batch to fill) until #stop or #close; stores the batch's offsets
    # once the block finished. When it does not finish (raise, break, return,
    # throw), each partition goes back to its first message of the batch.
    # @yieldparam messages [Array<Message>]
    # @param max_items [Integer] at most this many messages per batch
    # @param max_wait [Numeric] ms to wait for a batch to fill before yielding what there is
    # @param retries [Hash, nil] as #each_message's: the whole batch runs again
    # @param dead_letter [String, Hash, nil] as #each_message's: every message of the batch goes there
    # @return [nil] once stopped
    # @raise [ArgumentError] max_items or max_wait out of range
    # @raise [Errors::ConsumerClosedError]
    # @raise [Errors::AuthenticationError] the brokers refuse the consumer's credentials or TLS
    # @example
    #   consumer.each_batch(max_items: 100) do |messages|
    #     Order.insert_all(messages.map { |message| JSON.parse(message.payload) })
    #   end
    def each_batch(max_items: 500, max_wait: 100, retries: nil, dead_letter: nil, &block)
      raise ArgumentError, "max_items must be a positive Integer, got #{max_items.inspect}" unless max_items.is_a?(Integer) && max_items.positive?

      milliseconds(max_wait, "max_wait")
      policy = failure_policy(retries, dead_letter, false)

      open_client
      @inbox.reading do
        while (batch = @inbox.take_batch(max_items, max_wait))
          next if batch.empty?

          finished = false
          begin
            policy ? policy.run(batch, batch, &block) : yield(batch)
            finished = true
          ensure
            rewind(batch) unless finished
          end
          @inbox.processed_batch(batch)
        end
      end
    rescue Failure::Abandoned
      nil
    ensure
      policy&.close
      after_reading
    end

    # @!method poll(timeout_ms, store: config.poll_store)
    #   The next message within timeout_ms, or nil. A message poll returned
    #   was handed out; an interrupt (Timeout, Thread#raise) that ends poll
    #   before that leaves the message for the next read.
    #
    #   Its offset is not stored unless store is true: then the message is
    #   taken as finished when this consumer is read again (the next poll,
    #   each_message or each_batch, from any thread), and its offset stored as
    #   each_message stores a block's, in bulk with the others (no call into
    #   librdkafka a message, as #store_offset makes). So each poll finishes
    #   the message poll(store: true) returned before it as soon as it
    #   begins, even when it is then interrupted. What it returned last is
    #   not stored by #commit or #close, nor once its partition is revoked:
    #   the group reads it again. So poll again only once done with a
    #   message: a loop that goes on after a failed message (rescue, then
    #   poll) stores it as finished; seek back to it first, or use
    #   #store_offset.
    #   @param timeout_ms [Numeric] ms to wait for a message (0: only what is there)
    #   @param store [Boolean] the next read stores this message's offset
    #     (default: Config#poll_store, false unless set: setting it spares a
    #     poll loop the keyword, which costs a Hash a call)
    #   @return [Message, nil]
    #   @raise [ArgumentError] timeout_ms is not a number of ms, or another keyword
    #   @raise [Errors::ConsumerClosedError]
    #   @raise [Errors::ConsumerStateError] another thread or fiber is reading this consumer
    #   @raise [Errors::AuthenticationError] the brokers refuse the consumer's credentials or TLS
    #   @example
    #     while (message = consumer.poll(250, store: true))
    #       handle(message) # stored by the next poll
    #     end
    #   @example The same for every poll of the consumer (config.poll_store = true in Consumer.new's block)
    #     while (message = consumer.poll(250))
    #       handle(message) # stored by the next poll
    #     end
    #   @example Storing each offset yourself
    #     while (message = consumer.poll(250))
    #       handle(message)
    #       consumer.store_offset(message)
    #     end

    # Consumer#poll is defined natively (Native::Handoff#poll, ext/sluice/consume.c) around
    # #lend_polled: the message leaves the consumer in a step no interrupt can
    # land in.
    include Native::Handoff

    # What the next commit commits for the message's partition: the offset after it.
    # For messages read with #poll without store: (each_message, each_batch and
    # poll(store: true) store their own).
    # @param message [Message]
    # @return [nil]
    # @raise [ArgumentError] not a Message
    # @raise [Errors::ConsumerClosedError]
    # @raise [Errors::OffsetPastUnfinishedError] inside a block of each_message(concurrency:), while a
    #   lower offset of the partition is not finished (return from the block instead: each_message stores it)
    def store_offset(message)
      raise ArgumentError, "store_offset takes a Sluice::Message, got #{message.class}" unless message.is_a?(Message)

      client = open_client
      refuse_past_unfinished([[message.topic, message.partition, message.offset + 1]], "store_offset")
      client.store_offset(message)
      nil
    end

    # Commits the stored offsets, or the given ones ({ topic => { partition =>
    # offset of the next message to read } }). Synchronous unless async: then
    # the result is reported by consumer.offsets_committed (and error.occurred).
    # What each_message's blocks finished is stored first when this is called
    # from the reader (its block) or while nobody reads; from another thread
    # while one reads, what the reader stored so far is committed (the
    # reader's bookkeeping is its own: it stores the rest before its next drain).
    # (commit("orders" => { ... }) without braces arrives as keywords: by_topic.)
    # @param offsets [Hash{String => Hash{Integer => Integer}}, nil] nil: the stored offsets
    # @param async [Boolean]
    # @param by_topic [Hash] offsets given as keywords
    # @return [nil]
    # @raise [ArgumentError] offsets not of that shape
    # @raise [Errors::ConsumerError]
    # @raise [Errors::OffsetPastUnfinishedError] offsets given inside a block of each_message(concurrency:)
    #   past a lower offset of their partition not finished
    # @raise [Errors::ConsumerClosedError] closed, or a close of another thread began while it waited for the answer
    def commit(offsets = nil, async: false, **by_topic)
      offsets ||= by_topic unless by_topic.empty?
      raise ArgumentError, "commit takes { topic => { partition => offset } }, got #{offsets.inspect}" unless offsets.nil? || offsets.is_a?(Hash)

      client = open_client
      list = offsets&.flat_map do |topic, partitions|
        raise ArgumentError, "commit takes { topic => { partition => offset } }, got #{offsets.inspect}" unless partitions.is_a?(Hash)

        partitions.map { |partition, offset| [topic_name(topic), partition_number(partition), offset_number(offset)] }
      end
      refuse_past_unfinished(list, "commit")
      @inbox.store_processed if @inbox.reader?(Fiber.current) || !@inbox.reading? # another thread's: the reader stores
      check(commit_now(client, list, async), "commit")
      nil
    end

    # Stops fetching partition. What was fetched for it and not handed out yet
    # is given back: after #resume it is handed out again, nothing is skipped.
    # @param topic [String, Symbol]
    # @param partition [Integer]
    # @return [nil]
    # @raise [Errors::ConsumerStateError] the partition is not assigned
    # @raise [Errors::ConsumerError]
    def pause(topic, partition) = pause_or_resume(:pause, topic, partition)

    # Fetches a paused partition again, from where it was paused.
    # @param topic [String, Symbol]
    # @param partition [Integer]
    # @return [nil]
    # @raise [Errors::ConsumerStateError] the partition is not assigned
    # @raise [Errors::ConsumerError]
    def resume(topic, partition) = pause_or_resume(:resume, topic, partition)

    # The next message of partition will be the one at offset.
    # @param topic [String, Symbol]
    # @param partition [Integer]
    # @param offset [Integer]
    # @return [nil]
    # @raise [Errors::ConsumerStateError] the partition is not assigned
    # @raise [Errors::ConsumerError]
    def seek(topic, partition, offset)
      offset_number(offset)
      assigned!(topic, partition)
      seek_to([[topic.to_s, partition, offset]])
    end

    # The partitions this consumer reads now (by subscription or #assign).
    # @return [Hash{String => Array<Integer>}]
    def assignment = by_topic(open_client.assignment) { |_, partition| partition }.transform_values(&:sort)

    # Committed offsets of the assignment (-1001: none committed yet). A
    # coordinator that moved or is loading the group is asked again within
    # max_wait_timeout, in asks of at most a second (Shared::RefusableRead):
    # librdkafka cannot wake one, and a close of another thread waits for it.
    # @return [Hash{String => Hash{Integer => Integer}}]
    # @raise [Errors::ConsumerClosedError] closed meanwhile (at the end of the current ask)
    def committed
      client = open_client
      pairs = client.assignment.map { |topic, partition| [topic, partition] }
      return {} if pairs.empty?

      deadline = now + (@config.max_wait_timeout / 1000.0)
      ask = ->(ms) { Shared::Blocking.call { client.committed(pairs, ms) } }
      error, offsets = Shared::LeaderWait.retrying(deadline, pending: Shared::LeaderWait::COORDINATOR_PENDING) do
        Shared::RefusableRead.call(deadline, @state.method(:refusing_failure), &ask)
      end
      check(error.zero? ? nil : error, "committed")
      by_topic(offsets).transform_values(&:to_h)
    end

    # Messages behind the end of each assigned partition, counted from the
    # committed offset (from the start of the partition when none is).
    # @return [Hash{String => Hash{Integer => Integer}}]
    def lag
      committed.to_h do |topic, offsets|
        [topic, offsets.to_h { |partition, offset| [partition, lag_of(topic, partition, offset)] }]
      end
    end

    # The partition's low and high watermarks (first offset, offset after the last) on the broker.
    # @return [Array(Integer, Integer)]
    # @raise [Errors::ConsumerError]
    # @raise [Errors::AuthenticationError] the brokers refuse the consumer's credentials or TLS
    # @param topic [String, Symbol]
    # @param partition [Integer]
    def query_watermark_offsets(topic, partition)
      topic = topic_name(topic)
      partition_number(partition)
      client = open_client
      deadline = now + (@config.max_wait_timeout / 1000.0)
      watermarks = ->(ms) { Shared::Blocking.call { client.watermarks(topic.to_s, partition, ms) } }
      error, low, high = Shared::LeaderWait.retrying(deadline) do
        Shared::RefusableRead.call(deadline, @state.method(:refusing_failure), &watermarks)
      end
      check(error.zero? ? nil : error, "query_watermark_offsets")
      [low, high]
    end

    # each_message, each_batch and poll return after the current message or
    # batch; when none of them runs, the next one returns at once (a stop
    # just before the read began, as a signal's at start-up, is not lost).
    # Safe from any thread, fiber or signal handler.
    # @return [void]
    def stop = @inbox.stop

    # What a concurrent each_message holds now, as Parallel Consumer's gauges
    # count it: blocks running, messages taken and waiting for a worker (their
    # lane busy, or every worker), and messages retrying (retries:; waiting
    # out a backoff, run again, or being dead-lettered after a retry; not
    # counted in running). All 0 when no concurrent read runs. A few reads of
    # counters, no lock: cheap from any thread; the statistics.emitted event
    # of a consumer carries it (in_flight:), the metrics listeners' gauges.
    # @return [Hash{Symbol => Integer}] running:, waiting:, retrying:
    # @example
    #   consumer.in_flight # => {running: 60, waiting: 1_200, retrying: 4}
    def in_flight = @parallel&.in_flight || ParallelReading::IDLE

    # @return [String] id, polling mode and whether it is closed
    def inspect = "#<#{self.class.name} id=#{@id.inspect} mode=#{@config.polling.mode} #{closed? ? "closed" : "open"}>"

    # The native handle (Producer#transaction_mark_as_consumed).
    # @api private
    # @return [Native::Consumer]
    # @raise [Errors::ConsumerClosedError]
    def native = open_client

    private

    # each_message's reads with concurrency above 1 (ParallelReading); its ensure calls #after_reading.
    def each_message_in_parallel(settings, policy, &block)
      open_client
      shares = if settings.ordering == :partition
                 PartitionShares.new(max_buffered: settings.max_buffered, assignment: method(:assignment), pause: method(:pause),
                                     resume: method(:resume), rewind: method(:rewind))
               else
                 PartitionShares::None
               end
      shares = retry_pauses(policy, shares)
      reading = ParallelReading.new(inbox: @inbox, rewind: method(:rewind), instrument: method(:instrument), shares: shares, block: block,
                                    close_deadline: @life.method(:deadline), commit: @config.auto_commit?,
                                    retrying: policy ? policy.method(:retrying) : -> { 0 }, **settings.to_h)
      @inbox.reading(reading, turns: true) do
        @parallel = reading # for close, and for offsets a block stores itself
        reading.run
      ensure
        @parallel = nil
      end
      nil
    end

    # Inside a block of a concurrent each_message: offsets past a lower one not finished raise (ParallelReading).
    def refuse_past_unfinished(offsets, action) = @parallel&.refuse_past_unfinished(offsets, action)

    # Consumer#poll's Ruby part: the next message, lent (see Native::Handoff#poll).
    # @return [Array(Array<Message>, Array<Message>, nil), nil] the lease (Ledger#storing_lease, Ledger#plain_lease)
    # @param store [Boolean, nil] nil: not given (config.poll_store)
    # (The timeout was checked: a Fixnum >= 0 in C, anything else by #check_poll_timeout.)
    def lend_polled(timeout_ms, store)
      open_client if @life.closed? || @client.forked? # #open_client's checks without its call: to raise
      @inbox.poll(timeout_ms, store.nil? ? @poll_store : store)
    ensure
      after_reading if @close_after_reading # paid on every message: no call when no close waits
    end

    # Consumer#poll's timeout when it is not a Fixnum >= 0 (Native::Handoff#poll passes those).
    def check_poll_timeout(timeout_ms) = milliseconds(timeout_ms, "poll's timeout_ms")

    # The authentication or TLS failure that kept every broker down since the
    # reader last raised one, or nil: raised once per report, so a reader
    # that goes on raises again only while librdkafka still fails.
    # Without an OAUTHBEARER token (the listener answered a failure) nothing
    # can be read until one is set: every read raises it.
    def new_auth_failure
      standing = @state.token_refusal
      return standing if standing

      refusals = @state.refusals
      return if refusals == @refusals_raised

      @refusals_raised = refusals
      @state.auth_failure
    end

    # The native handle, for a call. A forked child's copy raises
    # ForkedProcessError here, before any of the parent's state (a reader) is looked at.
    def open_client
      raise Errors::ConsumerClosedError, "consumer #{@id} is closed" if closed?
      raise Errors::ForkedProcessError, "consumer #{@id} was created in another process; a forked child must create its own" if @client.forked?

      @client
    end

    # A synchronous commit's wait for its answer ends when a close of another
    # thread begins (that close waits for it before it leaves the group).
    # @return [Integer, nil] librdkafka's error code
    def commit_now(client, list, async)
      return client.commit(list, true) if async

      error = Shared::Blocking.call { client.commit(list, false, @config.max_wait_timeout) }
      raise Errors::ConsumerClosedError, "consumer #{@id} was closed during commit (it may still be made)" if error && @life.closing_elsewhere?

      error
    end

    def check(error, action)
      return true unless error

      raise Errors::ConsumerError.new(action, KafkaError.new(error))
    end

    def instrument(name, payload = {}) = @monitor.instrument(name, { consumer_id: @id }.merge!(payload))

    # A revoke with auto commit: what was processed on those partitions is
    # committed before they go. A failure is reported, and so is what it
    # leaves behind on the revoked partitions: their next owner reads those
    # messages again (at least once), or, with auto.offset.reset: latest and
    # nothing committed yet, skips them; this member, given one back,
    # resumes after them (LeftBehind).
    def commit_before_revoke(timeout_ms, revoked)
      return unless @config.auto_commit?

      timeout_ms ||= @config.max_wait_timeout
      stored = @client.take_stored(revoked)
      code, offsets = Shared::Blocking.call { @client.commit(nil, false, timeout_ms, true) }
      return unless code

      error = KafkaError.new(code)
      instrument("error.occurred", type: "consumer.commit_error", error: error)
      @left_behind.commit_failed(revoked, offsets, stored, error)
    end

    # A lost assignment (this member's session ended: the coordinator was
    # unreachable for session.timeout.ms) is revoked without a commit: what
    # was stored since the last commit is left behind.
    def lost_uncommitted(revoked)
      @left_behind.lost(revoked, @client.take_stored(revoked)) if @config.auto_commit?
    end

    # The messages' partitions go back to their first one here: none of them
    # was processed, so none may be skipped.
    def rewind(messages)
      open_client
      error = @inbox.rewind(messages)
      raise Errors::ConsumerError.new("seek", KafkaError.from_tuple(error)) if error
    rescue Errors::BaseError => e
      instrument("error.occurred", type: "consumer.rewind_error", error: e)
    end

    # positions: [[topic, partition, offset or nil (its first message not handed out)]]
    def seek_to(positions)
      open_client
      error = @inbox.give_back(positions)
      raise Errors::ConsumerError.new("seek", KafkaError.from_tuple(error)) if error
    end

    def pause_or_resume(action, topic, partition)
      assigned!(topic, partition)
      results = open_client.public_send(action, [[topic.to_s, partition]])
      seek_to([[topic.to_s, partition, nil]]) if action == :pause
      _, _, _, error = results.first
      check(error.zero? ? nil : error, action.to_s)
      nil
    end

    def assigned!(topic, partition)
      topic = topic_name(topic)
      partition_number(partition)
      return if open_client.assignment.any? { |t, p| t == topic.to_s && p == partition }

      raise Errors::ConsumerStateError, "#{topic}/#{partition} is not assigned to consumer #{@id} (assignment: #{assignment.inspect})"
    end

    def lag_of(topic, partition, committed_offset)
      low, high = query_watermark_offsets(topic, partition)
      [high - (committed_offset.negative? ? low : committed_offset), 0].max
    end

    def by_topic(partitions, &value)
      value ||= proc { |_, partition, offset| [partition, offset] }
      partitions.group_by(&:first).transform_values { |list| list.map { |entry| value.call(*entry) } }
    end
  end
end
