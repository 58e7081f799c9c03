# frozen_string_literal: true

module Sluice
  class Producer
    # The transactions of a producer with "transactional.id": what
    # Producer#transaction, #transaction_mark_as_consumed and #close ask of
    # them. One per producer, holding all of their state: the open
    # transaction, whether the client's transactions were initialised, a
    # commit or abort left unfinished, the failures in a row.
    #
    # One transaction at a time per producer; it belongs to the fiber that runs
    # the block. Every way out of the block ends it on the broker: commit when
    # the block returns, abort when it raises, or on break/return/throw (then
    # EarlyTransactionExitNotAllowedError), or when the producer's close takes
    # it over (#settle).
    #
    # It reads the producer's client, its poll state and settings from the
    # producer's ClientLife at each call (a reload replaces the client, and may
    # replace the settings), asks it whether a close runs elsewhere, and is
    # handed the two things of the producer's own it needs: its open check
    # and its reload.
    # @api private
    class Transactions
      include SlicedCalls # and Clock

      # Commits tried when librdkafka refuses one as retriable at once.
      COMMIT_ATTEMPTS = 3
      # Between two commits librdkafka refused as retriable at once (s).
      COMMIT_BACKOFF = 0.1
      # One commit call's wait (ms): between two, a close of another thread
      # or a signal handler's takes over (librdkafka resumes a commit that
      # timed out where it stopped).
      COMMIT_SLICE = 1_000
      # How long one init_transactions call waits (ms) before checking for an
      # authentication failure.
      INIT_SLICE = 500
      # Between two init_transactions calls librdkafka refused as retriable (s).
      INIT_BACKOFF = 0.1
      # What #mark_as_consumed raises outside the caller's open transaction.
      OUTSIDE = "transaction_mark_as_consumed needs an open transaction: call it inside producer.transaction { }"

      # The open transaction (nil: none), of any fiber: a produce notes its
      # first handle on it (Transaction#note).
      # @return [Transaction, nil]
      attr_reader :current

      # @param life [ClientLife] the producer's: its client and settings are read at each call
      # @param ensure_open [#call] raises Errors::ProducerClosedError when the producer refuses calls now
      # @param reload [#call] (error, attempt): rebuilds the producer's fatally broken client
      def initialize(life:, ensure_open:, reload:)
        @id = life.id
        @monitor = life.monitor
        @life = life
        @ensure_open = ensure_open
        @reload = reload
        @lock = Mutex.new
        @changed = ConditionVariable.new
        @current = nil
        @ready_for = nil # the client init_transactions was done for (a reload's new one needs its own)
        @reloads = 0 # fatal-error reloads in a row
        @unfinished = nil # :commit or :abort: timed out, to be finished by the next transaction or close
        @begun_at = nil # when librdkafka's current transaction began (see #fenced_by_timeout?)
        @failures = FailureBackoff.new
      end

      # Producer#transaction: the block in a transaction (see there).
      def run(&)
        return yield if own? # joined: the outer call ends it, and says what became of it

        txn = Transaction.new(Fiber.current, Thread.current, :opening, nil, now)
        run_transaction(txn, &)
      rescue Exception => e # rubocop:disable Lint/RescueException -- every error says what became of the transaction
        failed(txn, e) if txn
        raise
      end

      # Producer#transaction_mark_as_consumed (see there).
      def mark_as_consumed(consumer, messages)
        raise Errors::TransactionRequiredError, OUTSIDE unless own_open?

        # per partition, the offset after its last message
        last = Array(messages).group_by { |m| [m.topic, m.partition] }.transform_values { |list| list.map(&:offset).max }
        offsets = last.map { |(topic, partition), offset| [topic, partition, offset + 1] }
        transactional(:send_offsets_to_transaction, consumer.native, offsets, @life.wait_ms(call_timeout))
      end

      # @return [Boolean] inside a transaction block of this fiber
      def own? = !!(txn = @current) && txn.fiber.equal?(Fiber.current)

      # @return [Boolean] inside an open transaction of this fiber (its produces are in it)
      def own_open? = own? && @current.state == :open

      # @return [Boolean] the producer has a transactional.id
      def enabled? = config.transactional?

      # close: waits (until deadline) for the open transaction of another fiber
      # to end, then takes it over and aborts it, so none stays open on the
      # broker, and finishes a commit or abort that timed out. One being
      # opened or ended gets one INIT_SLICE more (its calls end by the
      # deadline: ClientLife#wait_ms), then is left (destroy waits for a call). A transaction of the thread a signal handler interrupted
      # cannot end while we wait: open, it is taken over at once; being opened
      # or ended, it is left to that thread.
      def settle(deadline, interrupted)
        txn = @lock.synchronize do
          # The interrupted thread's transaction cannot move while we wait: that thread runs the handler waiting for us.
          while (open = @current) && !open.thread.equal?(interrupted)
            left = deadline && (deadline + (open.state == :open ? 0 : INIT_SLICE / 1000.0) - now)
            break if left && left <= 0

            @changed.wait(@lock, left)
          end
          # One being ended by the interrupted thread is left to it: it goes on when the handler returns (and finds us closed).
          open.tap { |t| t.state = :aborted } if open&.state == :open
        end
        abort_transaction(txn, raise_errors: false) if txn # within the close's deadline: ClientLife#wait_ms
        finish_unfinished(@life.wait_ms(call_timeout), raise_errors: false) if @unfinished
      end

      private

      # The producer's current client (a reload replaces it) and settings (a reload may replace them).
      def client = @life.client

      def config = @life.config

      def run_transaction(txn)
        open_transaction(txn)
        outcome = :left_early
        begin
          value = yield
          outcome = :commit
          value
        rescue AbortTransaction
          outcome = :abort
          nil
        rescue Exception # rubocop:disable Lint/RescueException -- abort on anything, then re-raise
          outcome = :failed
          raise
        ensure
          end_transaction(txn, outcome)
        end
      end

      # The error leaving #run learns the outcome: unknown once a
      # commit was sent, unless the coordinator refused it for certain (an
      # abortable error, after which it was aborted). A fence or timeout after
      # a commit was sent may hide one that went through. Errors of other
      # classes (the block's own) learn it too, by extending them.
      def failed(txn, error)
        outcome = txn.commit_sent && !txn.aborted ? :unknown : :aborted
        error.extend(Errors::TransactionOutcome) unless error.is_a?(Errors::TransactionOutcome) || error.frozen?
        error.transaction_outcome = outcome if error.is_a?(Errors::TransactionOutcome)
        @failures.failed(error)
      end

      # How long (ms) one commit, abort or send_offsets call waits: the
      # producer's max_wait_timeout. librdkafka's -1 ("the remaining
      # transaction timeout") has no end while the broker does not answer: an
      # abort after a failed commit waited 90-127 s with the broker stopped,
      # interrupts masked, close and SIGTERM waiting behind it. A call that
      # timed out goes on in librdkafka and may be made again: the next
      # transaction, or close, finishes it first (#finish_unfinished).
      def call_timeout = config.max_wait_timeout

      # transaction.timeout.ms (ms): the broker aborts a transaction open longer.
      def transaction_timeout = config.kafka_value("transaction.timeout.ms")

      def open_transaction(txn)
        unless config.transactional?
          raise Errors::TransactionError.new("transaction",
                                             KafkaError.new(KafkaError.number_for(:not_configured), "producer has no transactional.id"))
        end

        @failures.wait
        @lock.synchronize do
          @changed.wait(@lock) while @current
          @ensure_open.call
          @current = txn
        end
        begin
          prepare_transactions
          finish_unfinished
          transactional(:begin_transaction)
          @begun_at = now
        rescue Exception # rubocop:disable Lint/RescueException -- the slot must be given back
          release(txn)
          recover_from_fatal_error
          raise
        end
        change(txn, :open)
        @monitor.instrument("transaction.started", producer_id: @id)
      end

      # init_transactions in slices of INIT_SLICE, so an authentication
      # failure ends it at once, within librdkafka's own bound for one call
      # (twice transaction.timeout.ms). A slice that ran out, or a retriable
      # refusal (a fresh cluster's coordinator still loading), is tried again:
      # one call would have retried those itself. A close of another thread
      # stops it between slices (each ends by the close's deadline).
      def prepare_transactions
        client = self.client
        return if @ready_for.equal?(client)

        deadline = now + (2 * transaction_timeout / 1000.0)
        begin
          transactional(:init_transactions, @life.wait_ms(INIT_SLICE))
        rescue Errors::TransactionError => e
          raise unless (e.code == :timed_out || e.kafka_error.retryable?) && !e.fatal? && now < deadline
          raise Errors::ProducerClosedError, "producer #{@id} was closed while this transaction began" if @life.closing_elsewhere?

          failure = @life.state.auth_failure
          raise Errors::AuthenticationError, failure if failure

          sleep(INIT_BACKOFF) unless e.code == :timed_out
          retry
        end
        @ready_for = client
      end

      def end_transaction(txn, outcome)
        taken_over = !claim(txn)
        case outcome
        when :commit then taken_over ? raise_taken_over : commit_transaction(txn)
        when :abort then abort_transaction(txn, raise_errors: true) unless taken_over
        when :failed then abort_transaction(txn, raise_errors: false) unless taken_over
        when :left_early then left_early(txn, taken_over)
        end
      ensure
        release(txn)
        @monitor.instrument("transaction.finished", producer_id: @id, time: (now - txn.started_at) * 1000)
        recover_from_fatal_error
      end

      # break/return/throw left the block: commit or not is ambiguous. A thread
      # being killed unwinds the same way; it is only aborted.
      def left_early(txn, taken_over)
        abort_transaction(txn, raise_errors: false) unless taken_over
        return if Thread.current.status == "aborting"

        raise Errors::EarlyTransactionExitNotAllowedError,
              "a transaction block was left by break, return or throw (Timeout.timeout without an exception " \
              "class throws too): the transaction was aborted; end the block normally, or raise Sluice::AbortTransaction"
      end

      def raise_taken_over
        raise Errors::ProducerClosedError, "producer #{@id} was closed while this transaction was open: close aborted it"
      end

      # A commit first delivers what the transaction produced, and rides out
      # a coordinator's failover: it goes on up to transaction.timeout.ms, the
      # time the broker gives the transaction. Not max_wait_timeout: that
      # failed the cluster's coordinator-kill spec (the failover outlasted
      # 5 s, and the commit that timed out committed later). Not librdkafka's
      # -1 either: a commit does not cap it, and waited forever on a killed
      # broker. In slices of COMMIT_SLICE, so a close (or a SIGTERM handler's)
      # stops it within one. One that timed out or was stopped is unfinished:
      # the next transaction, or close, makes it again first.
      # txn: this call's transaction (nil: one a timed-out commit left
      # unfinished), which learns that its commit was sent, or refused.
      def commit_transaction(txn = nil, timeout_ms = transaction_timeout)
        deadline = now + (timeout_ms / 1000.0)
        attempts = 0
        txn&.commit_sent = true
        begin
          transactional(:commit_transaction, @life.wait_ms(ms_until(deadline).clamp(1, COMMIT_SLICE)), unfinished: :commit)
          committed
        rescue Errors::TransactionError => e
          raise_closed_while_committing if @unfinished && @life.closing_elsewhere? # it waits for this transactional call
          retry if @unfinished && now < deadline
          if e.abortable?
            txn&.aborted = true # librdkafka refuses a commit as abortable before it sends one, or the coordinator refused it
            abort_transaction(nil, raise_errors: false)
          elsif e.retryable? && !@unfinished && (attempts += 1) < COMMIT_ATTEMPTS
            sleep(COMMIT_BACKOFF)
            retry
          end
          raise
        end
      end

      def committed
        @begun_at = nil # ended on the broker: nothing of it left to time out
        @reloads = 0
        @failures.reset
        @monitor.instrument("transaction.committed", producer_id: @id)
      end

      def raise_closed_while_committing
        raise Errors::ProducerClosedError,
              "producer #{@id} was closed while this transaction committed: the commit was left unfinished, and may still commit"
      end

      # Within timeout_ms, in slices of COMMIT_SLICE as a commit (an abort
      # that timed out is unfinished, as a commit).
      def abort_transaction(txn, raise_errors:, timeout_ms: call_timeout)
        wait_for_first_delivery(txn)
        in_slices(now + (timeout_ms / 1000.0), COMMIT_SLICE) { |ms| transactional(:abort_transaction, ms, unfinished: :abort) }
        @begun_at = nil
        @monitor.instrument("transaction.aborted", producer_id: @id)
      rescue Errors::BaseError => e
        raise if raise_errors

        @monitor.instrument("error.occurred", producer_id: @id, type: "transaction.abort", error: e)
      end

      # A commit or abort that timed out goes first, the same call again:
      # librdkafka takes no other until it ended. Still stuck, it raises (the
      # broker does not answer) and the next transaction tries again.
      def finish_unfinished(timeout_ms = call_timeout, raise_errors: true)
        case @unfinished
        when :commit then commit_transaction(nil, timeout_ms)
        when :abort then abort_transaction(nil, raise_errors: true, timeout_ms: timeout_ms)
        end
      rescue Errors::BaseError => e
        raise if raise_errors

        @monitor.instrument("error.occurred", producer_id: @id, type: "transaction.#{@unfinished || "abort"}", error: e)
      end

      # An abort right after the first produce can reach the coordinator
      # before the partition's registration did (librdkafka issue 4849): one
      # acknowledged delivery proves the registration is done.
      def wait_for_first_delivery(txn)
        timeout = config.wait_timeout_on_transaction_abort
        return unless timeout.positive? && (handle = txn&.first_handle)

        handle.wait(max_wait_timeout: @life.wait_ms(timeout), raise_response_error: false)
      rescue Errors::WaitTimeoutError
        nil # best effort: abort anyway
      end

      # The owner ends its transaction, unless close already took it over.
      def claim(txn)
        @lock.synchronize do
          return false unless txn.state == :open

          txn.state = :ending
          true
        end
      end

      def change(txn, state)
        @lock.synchronize do
          txn.state = state if txn.state == :opening
          @changed.broadcast
        end
      end

      def release(txn)
        @lock.synchronize do
          @current = nil if @current.equal?(txn)
          @changed.broadcast
        end
      end

      # A transactional client in a fatal state (fenced, or an abort that hit
      # librdkafka issue 4849) can do nothing more. With
      # reload_on_transaction_fatal_error a new one takes its place, within
      # max_attempts_on_transaction_fatal_error reloads in a row.
      def recover_from_fatal_error
        fatal = client.fatal_error
        return unless fatal

        error = KafkaError.new(*fatal, fatal: true)
        return unless config.reload_on_transaction_fatal_error && reloadable?(error)
        return if (@reloads += 1) > config.max_attempts_on_transaction_fatal_error

        @reload.call(error, @reloads)
        sleep(config.wait_backoff_on_transaction_fatal_error / 1000.0)
      rescue StandardError => e
        @monitor.instrument("error.occurred", producer_id: @id, type: "producer.reload", error: e)
      end

      def reloadable?(error) = !config.non_reloadable_errors.include?(error.code) || fenced_by_timeout?(error)

      # librdkafka reports two different fences as one :fenced: another
      # producer took the transactional.id (its init bumped the epoch), or the
      # broker's coordinator aborted this producer's transaction once it was
      # open longer than transaction.timeout.ms, and bumped the epoch itself
      # (an outage or a broker restart longer than that leaves this). The
      # broker's clock for a transaction starts after ours (at its first
      # partition), so a transaction younger than the timeout was fenced by
      # another producer: that stays fatal. An older one is taken to be the
      # broker's timeout, and a new client takes the transactional.id back.
      # (A producer stalled past the timeout while a successor took over
      # cannot tell the two apart: docs/DESIGN.md#a-fence-or-a-timeout.)
      # Judged once, when the fence is first met: the later calls of a fenced
      # client ask about no transaction.
      def fenced_by_timeout?(error)
        return false unless error.code == :fenced && @begun_at

        began = @begun_at
        @begun_at = nil
        now - began >= transaction_timeout / 1000.0
      end

      # Transaction calls cannot be cut short: interrupts (Timeout,
      # Thread#raise) wait until the call returned, so a transaction is never
      # left half-ended by one. Under a fiber scheduler the call runs off the
      # fiber's thread, and the mask is no fence there: Fiber#raise (Async's
      # Task#stop) ignores it and lands in the wait. So with `unfinished:`
      # (:commit, :abort) the call is noted as unfinished before it is made,
      # and whether it timed out (so goes on in librdkafka, to be made again)
      # is noted by the thread that made it, as it returns: a stop anywhere,
      # between two commit slices or during one, leaves no commit under way
      # unnoted.
      def transactional(action, *args, unfinished: nil)
        client = self.client
        @unfinished = unfinished if unfinished
        tuple = Thread.handle_interrupt(Object => :never) do
          Blocking.call(interruptible: false) { client.public_send(action, *args).tap { |result| note(result, unfinished) if unfinished } }
        end
        raise Errors::TransactionError.new(action.to_s.tr("_", " "), transaction_error(client, tuple)) if tuple
      end

      # A call that timed out goes on in librdkafka: unfinished until made again.
      def note(result, unfinished) = @unfinished = result && KafkaError.from_tuple(result).code == :timed_out ? unfinished : nil

      # A client in a fatal state may report _FATAL, or a symptom of it: say
      # which fatal error it is.
      def transaction_error(client, tuple)
        fatal = client.fatal_error
        fatal ? KafkaError.new(*fatal, fatal: true) : KafkaError.from_tuple(tuple)
      end
    end
  end
end
