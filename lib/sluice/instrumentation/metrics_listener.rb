# frozen_string_literal: true

module Sluice
  module Instrumentation
    # The events a metrics listener hears (Monitor#subscribe finds its
    # on_<event> methods) and what it makes of them: Metrics turns an event
    # into samples, the backend's #record writes each one. Listeners run on
    # the poller thread and on the application's threads at once; one mutex
    # keeps a backend's writes apart (neither library guards all of its own).
    module MetricsListener
      # Requires a metrics library when a listener that writes to it is
      # built, never with sluice itself.
      # @raise [LoadError] naming the package that provides it
      def self.require_library(feature, package)
        require feature
      rescue LoadError => e
        raise LoadError, "#{feature} is needed for this listener: install #{package} (#{e.message})"
      end

      # message.acknowledged, opted into with deliveries: true. The monitor
      # instruments it for every delivered message, and only while someone
      # listens: with this module the poller builds one event per delivery.
      module Deliveries
        # `message.acknowledged`: the acknowledged count, per topic.
        def on_message_acknowledged(event) = emit(@metrics.acknowledged(event))
      end

      # `statistics.emitted`: the client's, its brokers' and (a consumer's) its partitions' counts and gauges.
      def on_statistics_emitted(event) = emit(@metrics.statistics(event))
      # `error.occurred`: the error_occurred count, per error type.
      def on_error_occurred(event) = emit(@metrics.error(event))
      # `message.purged`: the purged count, per topic.
      def on_message_purged(event) = emit(@metrics.purged(event))
      # `consumer.partitions_assigned`: the consumer.assigned count (partitions), per topic.
      def on_consumer_partitions_assigned(event) = emit(@metrics.assigned(event))
      # `consumer.partitions_revoked`: the consumer.revoked count (partitions), per topic.
      def on_consumer_partitions_revoked(event) = emit(@metrics.revoked(event))
      # `transaction.finished`: the transaction.time timing (ms).
      def on_transaction_finished(event) = emit(@metrics.transaction(event))
      # `consumer.retry`: the consumer.retries count, per source topic.
      def on_consumer_retry(event) = emit(@metrics.retried(event))
      # `consumer.dead_lettered`: the consumer.dead_letters count, per source topic.
      def on_consumer_dead_lettered(event) = emit(@metrics.dead_lettered(event))
      # `poller.budget_exceeded`: the polling.budget_exceeded count.
      def on_poller_budget_exceeded(event) = emit(@metrics.budget_exceeded(event))
      # `producer.closed`: no metric; the producer's running totals are forgotten.
      def on_producer_closed(event) = @metrics.closed(event)
      # `consumer.closed`: no metric; the consumer's running totals are forgotten.
      def on_consumer_closed(event) = @metrics.closed(event)

      private

      def setup_metrics(deliveries)
        @metrics = Metrics.new
        @record_lock = Mutex.new
        extend(Deliveries) if deliveries
      end

      def emit(samples)
        return if samples.empty?

        @record_lock.synchronize { write(samples) }
      end

      # A backend may send a batch at once (StatsD); one by one by default.
      def write(samples) = samples.each { |sample| record(sample) }
    end
  end
end
