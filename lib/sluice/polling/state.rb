# frozen_string_literal: true

require "json"

module Sluice
  module Polling
    # One producer as its poller sees it: the native client to drain, and where
    # each drained event goes (delivery handles, the monitor, the logger).
    #
    # Draining happens in C with the GVL held; everything that runs user code
    # happens here, after the native call returned, so an exception can never
    # unwind through librdkafka.
    class State
      # syslog levels of librdkafka log lines -> Logger severities
      LOG_SEVERITIES = [Logger::FATAL, Logger::FATAL, Logger::FATAL, Logger::ERROR,
                        Logger::WARN, Logger::INFO, Logger::INFO, Logger::DEBUG].freeze

      attr_reader :producer_id, :client, :monitor, :max_time, :periodic_poll_interval
      attr_accessor :token

      def initialize(producer_id:, client:, monitor:, notifier:, logger:, max_time:, periodic_poll_interval:)
        @producer_id = producer_id
        @client = client
        @monitor = monitor
        @notifier = notifier
        @logger = logger
        @max_time = max_time
        @periodic_poll_interval = periodic_poll_interval
        @closed = false
        @dispatching = 0
      end

      # Drains the queue for at most budget_ms (negative: until empty) and
      # dispatches what it found. @return [Boolean] events were left (budget spent)
      def serve(budget_ms = @max_time)
        return false if @closed

        @dispatching += 1
        begin
          batch = @client.drain(budget_ms, @monitor.listening?("message.acknowledged"))
          dispatch(batch) if batch
          @client.exhausted?
        ensure
          @dispatching -= 1
          @notifier.notify
        end
      end

      # No drained batch is waiting to be dispatched. librdkafka counts a
      # message as done once its report left the queue; a flush must also wait
      # for our side, or a listener that yields the GVL lets it return early.
      def settled? = @dispatching.zero?

      # Everything on the queue, however long it takes.
      def drain_all = serve(-1)

      def wakeup_fd = @client.wakeup_fd

      # After this the poller ignores the state (a snapshot may still name it).
      def close! = @closed = true
      def closed? = @closed

      def instrument(name, payload = {})
        @monitor.instrument(name, { producer_id: @producer_id }.merge!(payload))
      end

      private

      # Successful deliveries were recorded on their handles in C; what comes
      # here is failures to resolve, deliveries to acknowledge (only when
      # someone listens) and events. Every failed handle is resolved whatever
      # happens: resolving cannot raise, and a failure while instrumenting one
      # item is reported and the loop goes on (the reports are already off
      # librdkafka's queue).
      def dispatch(batch)
        i = 0
        size = batch.size
        while i < size
          head = batch[i]
          begin
            if head.is_a?(Symbol)
              dispatch_event(head, batch[i + 1], batch[i + 2], batch[i + 3])
            elsif batch[i + 3].zero?
              @monitor.instrument("message.acknowledged", producer_id: @producer_id, topic: head.topic,
                                                          partition: head.partition, offset: head.offset, label: head.label)
            else
              failed(head.resolve(batch[i + 1], batch[i + 2], batch[i + 3]))
            end
          rescue StandardError, ScriptError => e
            dispatch_failed(e)
          end
          i += 4
        end
      end

      def dispatch_failed(error)
        instrument("error.occurred", type: "poller.dispatch_error", error: error)
      rescue StandardError, ScriptError
        nil # the monitor could not report it either; polling must go on
      end

      def failed(report)
        instrument("error.occurred", type: "librdkafka.dispatch_error", error: Errors::ProduceError.new(report.error, delivery_report: report),
                                     topic: report.topic, partition: report.partition, offset: report.offset, label: report.label)
      end

      def dispatch_event(type, a, b, c)
        case type
        when :error then instrument("error.occurred", type: "librdkafka.error", error: KafkaError.new(a, b, fatal: c))
        when :statistics then statistics(a)
        when :oauthbearer_token_refresh then token_refresh(a)
        when :log then @logger.add(LOG_SEVERITIES.fetch(a, Logger::INFO), "[#{@producer_id}] #{b}: #{c}")
        end
      end

      def statistics(json)
        return unless @monitor.listening?("statistics.emitted")

        instrument("statistics.emitted", statistics: JSON.parse(json))
      end

      def token_refresh(bearer_config)
        if @monitor.listening?("oauthbearer.token_refresh")
          instrument("oauthbearer.token_refresh", bearer_config: bearer_config)
        else
          @client.oauthbearer_set_token_failure("no oauthbearer.token_refresh listener to provide a token")
        end
      end
    end
  end
end
