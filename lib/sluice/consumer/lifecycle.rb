# frozen_string_literal: true

module Sluice
  class Consumer
    # A consumer's hooks in the client lifecycle (Shared::ClientHooks, Shared::ClientLife), and its
    # close: from its reader, from another thread or fiber while it reads or
    # waits, from a listener on the polling thread, a signal handler or at exit.
    module Lifecycle
      include Shared::ClientHooks

      # At least this long (ms) for librdkafka's teardown after the close
      # timeout is spent: a teardown that has nothing left to wait for takes
      # a few ms. What is left after it goes on in a thread of its own.
      DESTROY_GRACE = 400

      # Stops reading, commits the stored offsets (with auto commit), leaves
      # the group (serving the rebalance that gives the partitions up) and
      # releases everything, all within timeout: what could not be committed
      # or answered by then is reported (error.occurred), not waited for.
      # From the moment it begins, calls of other threads raise
      # ConsumerClosedError. Idempotent. Called inside each_message's block
      # (any of them with concurrency:), from a listener while another thread
      # reads, or from a signal handler that interrupted the reader, it takes
      # effect when the reader returns. The timeout counts from the call
      # (from the reader's return when called inside a one-at-a-time read's
      # block, or a signal handler that interrupted its reader): a concurrent
      # read's running blocks get half of it, then are killed (as past
      # finish_within) and what they did not finish is handed out again.
      # @param timeout [Integer] ms for all of it: the reader's return, committing, leaving the group
      # @return [nil]
      # @raise [ArgumentError] timeout is not a positive number of ms
      # @raise [Errors::ConsumerCloseTimeoutError] from another thread, the
      #   reader's own block (concurrency 1, each_batch) did not return within
      #   timeout: the consumer is still open, and closes when it returns
      def close(timeout: @config.max_wait_timeout)
        unless timeout.is_a?(Numeric) && timeout.positive?
          raise ArgumentError,
                "close's timeout is a positive number of milliseconds, got #{timeout.inspect}"
        end
        return if closed?
        return forget_inherited if @client.forked?
        return close_from_trap(timeout) if Shared::Blocking.trap_context?

        @inbox.stop
        return defer_close(timeout) if in_own_block?

        begin_close(timeout)
        return defer_close(timeout) if close_later?

        wait_for_reader(timeout)
        close_now(timeout)
      end

      private

      def kind = :consumer

      def native_class = Native::Consumer

      def closed_error = Errors::ConsumerClosedError

      # Every statistics.emitted of a consumer carries #in_flight: the
      # metrics listeners' gauges of a concurrent read, at the statistics'
      # pace (0 when none runs, so no gauge keeps a finished read's numbers).
      def polled_options = super.merge(statistics_extras: -> { { in_flight: in_flight } })

      def connected(client, state)
        super
        @refusals_raised = 0
        @left_behind = LeftBehind.new(client: client, instrument: method(:instrument), timeout_ms: @config.max_wait_timeout)
        @inbox = Inbox.new(client: client, keepalive_ms: @config.max_poll_interval_ms / 2, seek_timeout_ms: @config.max_wait_timeout,
                           rebalancer: Rebalancer.new(client: client, commit: method(:commit_before_revoke), lost: method(:lost_uncommitted),
                                                      instrument: method(:instrument), left_behind: @left_behind),
                           instrument: method(:instrument), refused: method(:new_auth_failure), commit_starts: @config.auto_commit?)
        @parallel = nil # a concurrent each_message's ParallelReading while it reads
      end

      def detach = @inbox.shut

      # The close's one deadline starts: a concurrent read's wait for its
      # running blocks takes it, even one under way.
      def begin_close(timeout)
        @life.begin_close(timeout)
        @parallel&.close_began
      end

      # The caller is the reader of a one-at-a-time read (in its block, or a
      # signal handler that interrupted it): the close happens when it
      # returns, and its deadline starts then.
      def in_own_block? = @inbox.reader?(Fiber.current) && !@parallel

      # The reader of a concurrent each_message (a listener it runs), inside
      # one of its blocks (the read waits for that block before it returns),
      # or on a polling thread, which must not wait for a reader that may
      # wait for it.
      def close_later? = @inbox.reading? && (@inbox.reader?(Fiber.current) || @parallel&.in_block? || Polling.thread?)

      # Another thread reads: it returns once its running blocks finished or
      # were killed (ParallelReading), unless it runs a block itself. One that
      # outlives the close's deadline makes the close raise (it would leave
      # the consumer open in silence) and close when it returns, with a
      # deadline of its own.
      def wait_for_reader(timeout)
        return if @inbox.wait_idle([@life.deadline - now, 0].max)

        @life.close_abandoned
        defer_close(timeout)
        raise Errors::ConsumerCloseTimeoutError,
              "consumer #{@id}: its reader did not return within the close timeout (#{timeout} ms), its block still runs; " \
              "the consumer stays open and closes when the reader returns"
      end

      def defer_close(timeout)
        @close_after_reading = timeout
        nil
      end

      def after_reading
        close(timeout: @close_after_reading) if @close_after_reading && !@inbox.reading?
      end

      def close_now(timeout)
        @life.begin_close(timeout) # kept when it began before the reader returned
        @life.close_under_lock { shut_down }
        nil
      end

      # In a forked child: the handle, its group membership and any reader
      # are the parent's (no reader of the parent runs here, so nothing is
      # waited for). The child only stops using its copy.
      def forget_inherited
        @life.forgotten!
        instrument("consumer.closed")
        nil
      end

      def shut_down
        deadline = @life.deadline
        leave_group(deadline) if quiet?(ms_until(deadline).clamp(1, nil))
        @life.disconnect([ms_until(deadline), DESTROY_GRACE].max)
      end

      # Other threads' calls are refused from here on; those already inside
      # librdkafka end first (each within its own timeout), or the group's
      # teardown would race them.
      def quiet?(timeout)
        return true if @client.close_start(timeout)

        close_error(timed_out("calls of other threads still running: the group is not left"))
        false
      end

      def leave_group(deadline)
        @inbox.store_processed
        commit_before_revoke(ms_until(deadline), @client.assignment.map { |topic, partition| [topic, partition] })
        error = @client.close_begin
        close_error(KafkaError.from_tuple(error)) if error
        @inbox.serve_until_closed(deadline)
        close_error(timed_out("the group was not left within the close timeout")) unless @client.consumer_closed?
      end

      def timed_out(what) = KafkaError.new(KafkaError.number_for(:timed_out), what)

      def close_error(error) = instrument("error.occurred", type: "consumer.close_error", error: error)

      # See Shared::ClientLife#close_on_own_thread: a signal handler may not lock
      # a Mutex, and may have interrupted code that holds one we need. When
      # it interrupted the reader, a closer thread would wait for the reader
      # to return, which waits for this handler: the close happens when the
      # reader returns instead, as from the reader's own block. A reader's
      # block that outlives the timeout is reported, not raised: the handler's
      # join would raise it into whatever code the signal interrupted.
      def close_from_trap(timeout)
        @inbox.stop
        return defer_close(timeout) if in_own_block?

        begin_close(timeout) # a concurrent read's blocks take its deadline, even when the reader was interrupted
        return defer_close(timeout) if @inbox.reader?(Fiber.current)

        @life.close_on_own_thread(timeout) do
          close(timeout: timeout)
        rescue Errors::ConsumerCloseTimeoutError => e
          close_error(e)
        end
      end
    end
  end
end
