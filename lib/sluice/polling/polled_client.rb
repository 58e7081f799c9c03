# frozen_string_literal: true

require "json"

module Sluice
  module Polling
    # One client as its poller sees it: the native client whose main queue is
    # drained, and where each drained event goes (delivery handles, the
    # monitor, the logger).
    #
    # Draining happens in C with the GVL held; everything that runs user code
    # happens here, after the native call returned, so an exception can never
    # unwind through librdkafka.
    class PolledClient
      include Shared::Clock

      # How long one #pump blocks (ms).
      PUMP_MS = 10

      # syslog levels of librdkafka log lines -> Logger severities
      LOG_SEVERITIES = [Logger::FATAL, Logger::FATAL, Logger::FATAL, Logger::ERROR,
                        Logger::WARN, Logger::INFO, Logger::INFO, Logger::DEBUG].freeze

      # What a purged message's report says (queued, or in flight).
      PURGE_ERRORS = %i[purge_queue purge_inflight].map { |code| KafkaError.number_for(code) }.freeze
      # A commit with nothing to commit: not an error worth reporting.
      NO_OFFSET_TO_COMMIT = KafkaError.number_for(:no_offset)
      # What a report that never arrived says (its client was destroyed first).
      NO_PARTITION = -1
      NO_OFFSET = -1001 # RD_KAFKA_OFFSET_INVALID

      attr_reader :kind, :client_id, :client, :monitor, :max_time, :periodic_poll_interval, :purged, :refusals
      attr_accessor :token

      # @param kind [Symbol] :producer (names events and payload keys)
      # @param results [#deliver, nil] where an admin client's request results go
      # @param bearer [Producer, Consumer, Admin] what answers a token refresh (event[:bearer])
      # @param statistics_extras [#call] => Hash added to each statistics.emitted payload (a consumer's in_flight:)
      def initialize(kind:, client_id:, client:, monitor:, notifier:, logger:, max_time:, periodic_poll_interval:, results: nil,
                     bearer: nil, statistics_extras: -> { {} })
        @kind = kind
        @statistics_extras = statistics_extras
        @bearer = bearer
        @client_id = client_id
        @id_key = :"#{kind}_id"
        @client = client
        @monitor = monitor
        @notifier = notifier
        @results = results
        @logger = logger
        @max_time = max_time
        @periodic_poll_interval = periodic_poll_interval
        @closed = false
        @leaving = false
        @dispatching = 0
        @backlog = nil # drained, not yet dispatched: flat quads (see Client#drain)
        @backlog_at = 0
        @served_at = now
        @budget = Budget.new(PURGE_ERRORS)
        @purged = 0
        @statistics = Instrumentation::StatisticsDecorator.new
        prepare_token_refresh
        # An admin client's progress is the brokers' answers (it delivers and fetches nothing).
        @auth_watch = AuthWatch.new(progress: results ? results.method(:answered) : client.method(:progress))
        @refusals = 0 # times every broker was down for an authentication failure
      end

      # The authentication or TLS failure (a KafkaError) that keeps every
      # broker down, or nil.
      def auth_failure = @auth_watch.current

      # The authentication or TLS failure that keeps every broker down now, or nil.
      def refusing_failure = @auth_watch.refusing

      # The failure while the application's answer stands that it has no OAUTHBEARER token, or nil.
      def token_refusal = @auth_watch.token_refusal

      # Drains the queue and dispatches what it found, for at most budget_ms
      # (negative: until empty). Dispatch counts against the budget too: it is
      # where user code runs, and the clock is read after every item it
      # dispatches. What is left waits in a backlog for the next turn.
      # @return [Boolean] work is left (the budget ran out)
      def serve(budget_ms = @max_time)
        return false if @closed
        return serve_nested(budget_ms) if @dispatching.positive?

        @dispatching += 1
        begin
          @served_at = @budget.start(budget_ms)
          left = serve_turn
          budget_exceeded(budget_ms) if left || @budget.overrun
          left
        ensure
          @dispatching -= 1
          @notifier.notify
        end
      end

      # A periodic poll: a client with nothing queued and nothing left over is
      # only marked served (no drain, no pipe read, no dispatch), so 1,000 idle
      # clients cost the poller little more than a queue-length check each.
      # @return [Boolean] like #serve
      def poll
        return false if @closed
        return serve if @backlog || @dispatching.positive? || !@client.idle?

        @served_at = now
        false
      end

      # Everything on the queue, however long it takes.
      def drain_all = serve(-1)

      # When the periodic poll is next due for this client: a whole
      # periodic_poll_interval after it was last served, since the periodic poll
      # is for clients whose pipe stayed silent, not for one that just had its turn.
      def next_poll_at = @served_at + (@periodic_poll_interval / 1000.0)

      # For a wait on the polling thread itself, where nobody else would serve
      # the queue: block up to timeout_ms for events, then dispatch them here.
      def pump(timeout_ms = PUMP_MS)
        drain_all if @client.wait_events(timeout_ms)
      end

      # Nothing drained is waiting to be dispatched. librdkafka counts a message
      # as done once its report left the queue; a flush must also wait for our
      # side, or a listener that yields the GVL lets it return early.
      def settled? = @dispatching.zero? && @backlog.nil?

      # The pipe librdkafka writes to when the client's queue gets events.
      def wakeup_fd = @client.wakeup_fd

      # Marks the client as leaving its poller; true the first time only.
      def leave!
        return false if @leaving

        @leaving = true
      end

      # After this the poller ignores the state (a snapshot may still name it).
      def close!
        @closed = true
        @monitor.forget_deferred(self)
        StatisticsThread.instance.forget(self)
        @refresher.stop
      end

      # After #close!, on the closing caller's thread (not the poller's): a
      # refresh still running is waited for, at most RefreshThread::STOP_WAIT.
      def await_refresh = @refresher.join

      def closed? = @closed

      # StatisticsThread: one emission, parsed, with its deltas, to the listeners.
      # (Only that thread calls it, so the decorator's previous emission is its alone.)
      # @param json [String] librdkafka's statistics
      def announce_statistics(json)
        instrument("statistics.emitted", { statistics: @statistics.call(JSON.parse(json)) }.merge!(@statistics_extras.call))
      rescue JSON::ParserError => e
        instrument("error.occurred", type: "statistics.parse_error", error: e)
      end

      # Fires an event of this client's monitor, with the client's id in the payload.
      def instrument(name, payload = {})
        @monitor.instrument(name, { @id_key => @client_id }.merge!(payload))
      end

      # A handle whose report never came (its client was destroyed first):
      # resolved as purged, or with the fatal error that ended the client.
      def orphaned(handle, error)
        if error
          failed_with(handle.resolve_error(NO_PARTITION, NO_OFFSET, error))
        else
          announce_purge(handle.resolve(NO_PARTITION, NO_OFFSET, PURGE_ERRORS.first))
        end
      rescue StandardError, ScriptError => e
        dispatch_failed(e)
      end

      # The owner's #oauthbearer_set_token: counted, so that a refresh its
      # listeners left unanswered can be told to librdkafka (see #token_refresh).
      # A token set ends a refusal that no token caused.
      def oauthbearer_set_token(token, lifetime_ms, principal_name, extensions)
        @token_answers += 1
        @client.oauthbearer_set_token(token, lifetime_ms, principal_name, extensions).tap do |error|
          @auth_watch.token_set unless error
        end
      end

      # Without a token librdkafka connects to no broker, and says only that
      # it has none (no all_brokers_down follows): the application's answer
      # is itself the refusal, so what waits on the brokers fails with it now.
      def oauthbearer_set_token_failure(reason)
        @token_answers += 1
        @client.oauthbearer_set_token_failure(reason)
        refuse_pending if @auth_watch.token_failed(KafkaError.new(KafkaError.number_for(:authentication),
                                                                  "no OAUTHBEARER token: #{reason}"))
      end

      # Called by the monitor, on the subscriber's thread, when the first
      # oauthbearer.token_refresh listener arrives after a refresh nobody
      # could answer (the first one fires inside Producer.new/Consumer.new):
      # the refresh thread answers it.
      def subscribed(_event_name) = @refresher.kick

      # @return [String] the kind of client, its id, and whether it is closed
      def inspect = "#<#{self.class.name} #{@kind} #{@client_id.inspect}#{" closed" if @closed}>"

      private

      # A callback of this client polls again (flush, close or produce_sync on
      # the polling thread): it serves the new events at once, and the turn
      # that called the callback finishes its own backlog after it returns.
      def serve_nested(budget_ms)
        @dispatching += 1
        batch = @client.drain(budget_ms, acks?)
        (0...batch.size).step(4) { |i| dispatch(batch[i], batch[i + 1], batch[i + 2], batch[i + 3]) } if batch
        @client.exhausted?
      ensure
        @dispatching -= 1
        @notifier.notify
      end

      # @return [Boolean] work is left (the deadline came first)
      def serve_turn
        return true unless dispatch_backlog
        return false if @closed # a callback closed the client meanwhile

        @backlog = @client.drain(@budget.left_ms, acks?)
        @backlog_at = 0
        return true unless dispatch_backlog

        @client.exhausted?
      end

      def acks? = @monitor.listening?("message.acknowledged")

      # The turn ended with work left (the rest waits for the next turn), or
      # one item's listeners ran past max_time: a client that often does is
      # too slow for its max_time (its listeners, or its volume), and delays
      # its poller's other clients. `event` names the event whose listeners
      # were running when max_time ran out (nil: the drain used it up), and
      # `listeners` those listeners.
      def budget_exceeded(budget_ms)
        return unless @monitor.listening?("poller.budget_exceeded")

        event, took = @budget.overrun
        listeners = event ? @monitor.listeners(event).map { |listener| Budget.name_of(listener) } : []
        instrument("poller.budget_exceeded", max_time: budget_ms, event: event, listeners: listeners, time: took)
      end

      # Successful deliveries were recorded on their handles in C; what is
      # dispatched here is failures to resolve, deliveries to acknowledge (only
      # when someone listens) and events. One item per turn at least, however
      # slow; the clock is read after each one.
      # @return [Boolean] the backlog is done (false: the deadline came first)
      def dispatch_backlog
        @budget.batch_started
        while (batch = @backlog)
          i = @backlog_at
          if i >= batch.size
            @backlog = nil
            break
          end
          @backlog_at = i + 4
          dispatch(batch[i], batch[i + 1], batch[i + 2], batch[i + 3])
          return false if @budget.past?(batch[i], batch[i + 3]) && @backlog_at < batch.size
        end
        true
      end

      # One item: every failed handle is resolved whatever happens (resolving
      # cannot raise), and a failure while instrumenting is reported, never
      # raised into the poller.
      def dispatch(head, a, b, code)
        if head.is_a?(Symbol)
          dispatch_event(head, a, b, code)
        elsif code.zero?
          instrument("message.acknowledged", topic: head.topic, partition: head.partition, offset: head.offset, label: head.label)
        else
          failed(head, a, b, code)
        end
      rescue StandardError, ScriptError => e
        dispatch_failed(e)
      end

      def dispatch_failed(error)
        instrument("error.occurred", type: "poller.dispatch_error", error: error)
      rescue StandardError, ScriptError
        nil # the monitor could not report it either; polling must go on
      end

      # A failure caused by a fatal error (the client is dead: fenced,
      # idempotence broken) says so, instead of the purge it led to.
      def failed(handle, partition, offset, code)
        fatal = @client.fatal_error
        if fatal
          failed_with(handle.resolve_error(partition, offset, KafkaError.new(*fatal, fatal: true)))
        elsif PURGE_ERRORS.include?(code) && (refused = auth_failure)
          failed_with(handle.resolve_error(partition, offset, refused))
        elsif PURGE_ERRORS.include?(code)
          @purged += 1
          announce_purge(handle.resolve(partition, offset, code))
        else
          failed_with(handle.resolve(partition, offset, code))
        end
      end

      def failed_with(report)
        instrument("error.occurred", type: "librdkafka.dispatch_error", error: Errors::ProduceError.new(report.error, delivery_report: report),
                                     topic: report.topic, partition: report.partition, offset: report.offset, label: report.label)
      end

      def announce_purge(report)
        instrument("message.purged", topic: report.topic, label: report.label, error: report.error)
      end

      def dispatch_event(type, a, b, c)
        case type
        when :error then librdkafka_error(a, b, c)
        when :statistics then statistics(a)
        when :oauthbearer_token_refresh then token_refresh(a)
        when :offset_commit then offsets_committed(a, b)
        when :admin_result then @results&.deliver(a)
        when :log then @logger.add(LOG_SEVERITIES.fetch(a, Logger::INFO), "[#{@client_id}] #{b}: #{c}")
        end
      end

      # An authentication or TLS failure followed by every broker down: no
      # message can be delivered until the broker accepts the client, so the
      # pending ones fail now, with that failure, instead of after
      # message.timeout.ms. The client stays: librdkafka keeps reconnecting,
      # and what is produced after rotated credentials is delivered.
      def librdkafka_error(code, reason, fatal)
        error = KafkaError.new(code, reason, fatal: fatal)
        refuse_pending if @auth_watch.observe(error)
        instrument("error.occurred", type: "librdkafka.error", error: error)
      end

      # A producer's pending messages fail; a consumer's reader wakes up to
      # raise it (Consumer#poll, each_message, each_batch); an admin's
      # waiting requests wake up to raise it.
      def refuse_pending
        @refusals += 1
        case @kind
        when :producer then @client.purge if @client.inflight_count.positive?
        when :admin then @results&.refuse
        else @client.wake_messages
        end
      end

      # A consumer's commit result (async, or librdkafka's auto-commit).
      def offsets_committed(code, partitions)
        error = KafkaError.new(code) unless code.zero? || code == NO_OFFSET_TO_COMMIT
        committed = partitions.group_by(&:first).transform_values { |list| list.to_h { |_, partition, offset| [partition, offset] } }
        instrument("consumer.offsets_committed", partitions: committed, error: error)
        instrument("error.occurred", type: "consumer.commit_error", error: error) if error
      end

      # Parsed and announced on StatisticsThread, not here: a large emission
      # must not hold up the poller's other clients. No listener, no parse.
      def statistics(json)
        StatisticsThread.instance.push(self, json) if @monitor.listening?("statistics.emitted")
      end

      def prepare_token_refresh
        @token_lock = Mutex.new
        @pending_token_refresh = nil # [bearer_config] of a refresh nobody answered yet: replayed to the first listener
        @token_answers = 0
        @refresher = RefreshThread.new("sluice.oauthbearer##{@client_id}") { answer_token_refresh }
      end

      # Answered on the refresh thread, never here: a listener fetching a
      # token over the network must not hold up the poller's other clients.
      # Without a listener the request waits for the first one to subscribe
      # (Monitor#defer_until_subscribed); librdkafka is told of the failure
      # meanwhile, so that it reports it and asks again later anyway.
      def token_refresh(bearer_config)
        @token_lock.synchronize { @pending_token_refresh = [bearer_config] }
        if @monitor.defer_until_subscribed("oauthbearer.token_refresh", self)
          token_failure("no oauthbearer.token_refresh listener to provide a token")
        else
          @refresher.kick
        end
      end

      # On the refresh thread, once per request (a kick from the poller and
      # one from a subscriber find one request). A request the listeners did
      # not answer ends in a token failure: without one librdkafka would
      # never ask again.
      def answer_token_refresh
        pending = @token_lock.synchronize { @pending_token_refresh.tap { @pending_token_refresh = nil } }
        return if pending.nil? || @closed

        bearer_config, = pending
        answers = @token_answers
        begin
          instrument("oauthbearer.token_refresh", bearer_config: bearer_config, bearer: @bearer)
        ensure
          token_failure("the oauthbearer.token_refresh listeners set no token") if @token_answers == answers
        end
      rescue StandardError, ScriptError => e
        dispatch_failed(e)
      end

      def token_failure(reason)
        @client.oauthbearer_set_token_failure(reason) unless @closed
      rescue Errors::ClientClosedError
        nil # closed meanwhile: nobody to tell
      end
    end
  end
end
