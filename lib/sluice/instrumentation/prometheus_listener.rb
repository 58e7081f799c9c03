# frozen_string_literal: true

module Sluice
  module Instrumentation
    # librdkafka's statistics and sluice's events as Prometheus metrics, in a
    # prometheus-client-mmap registry (Debian: ruby-prometheus-client-mmap),
    # which the application serves as it already does (its Rack exporter, or
    # Prometheus::Client::Formats::Text.marshal_multiprocess); .new shows how
    # to subscribe one.
    #
    # Names are Metrics' names with dots as underscores under the namespace
    # (sluice_network_latency_avg); counters end in _total; timings are
    # histograms in ms. Labels: client_id, kind and, by metric, broker, topic,
    # partition or type; plus the labels given here. docs/METRICS.md lists them.
    class PrometheusListener
      include MetricsListener

      # What to install when prometheus/client is missing (the LoadError says it).
      PACKAGE = "ruby-prometheus-client-mmap (gem prometheus-client-mmap)"
      # The histogram buckets of timings (transaction.time), in ms: 5 ms to 30 s.
      BUCKETS_MS = [5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000].freeze

      # Where the metrics are registered: serve or marshal it to expose them.
      # @return [Prometheus::Client::Registry]
      attr_reader :registry

      # Subscribe it to the monitor of each client to measure.
      # @param registry [Prometheus::Client::Registry] where the metrics are
      #   registered (default: Prometheus::Client.registry); a metric another
      #   sluice listener registered there already is shared
      # @param namespace [String] the metric names' prefix
      # @param labels [Hash{Symbol => String}] added to every sample (say, host:)
      # @param deliveries [Boolean] also count every delivered message
      #   (message.acknowledged: an event per message; see Deliveries)
      # @raise [LoadError] prometheus-client-mmap is not installed (the message names the package)
      # @raise [Errors::MetricNameTakenError] the registry holds one of its names, not from a sluice listener
      # @example One listener for every client of the monitor, with a label of the application's own
      #   listener = Sluice::Instrumentation::PrometheusListener.new(registry: Prometheus::Client.registry, labels: { app: "billing" })
      #   monitor.subscribe(listener)
      def initialize(registry: nil, namespace: "sluice", labels: {}, deliveries: false)
        MetricsListener.require_library("prometheus/client", PACKAGE)
        @registry = registry || ::Prometheus::Client.registry
        @namespace = namespace
        @labels = labels
        @families = {} # sample name => its metric (under the record lock)
        refuse_taken_names!
        setup_metrics(deliveries)
      end

      # The metrics sluice's listeners registered, per registry (a registry
      # shared by several listeners shares them).
      OURS = ObjectSpace::WeakMap.new
      # (see OURS)
      OURS_LOCK = Mutex.new
      # A sample type -> the Prometheus metric type it is registered as
      PROMETHEUS_TYPES = { count: :counter, gauge: :gauge, timing: :histogram }.freeze

      private

      # Every name it will register: one the registry holds, which no sluice
      # listener registered, is someone else's.
      def refuse_taken_names!
        ours = OURS_LOCK.synchronize { OURS[@registry] || [] }
        Metrics::TYPES.each do |name, type|
          metric_name = prometheus_name(name, PROMETHEUS_TYPES.fetch(type))
          taken = @registry.get(metric_name)
          next if taken.nil? || ours.include?(metric_name)

          raise Errors::MetricNameTakenError,
                "#{metric_name} is registered in this Prometheus registry already (a #{taken.type}), not by a sluice listener: " \
                "give the listener a namespace of its own, PrometheusListener.new(namespace: \"myapp_sluice\") say"
        end
      end

      def record(sample)
        labels = @labels.merge(sample.tags)
        case sample.type
        when :count then family(sample, :counter).increment(labels, sample.value)
        when :gauge then family(sample, :gauge).set(labels, sample.value)
        else family(sample, :histogram).observe(labels, sample.value)
        end
      end

      def family(sample, type)
        @families[sample.name] ||= begin
          name = prometheus_name(sample.name, type)
          @registry.get(name) || register(type, name, Metrics::HELP.fetch(sample.name))
        end
      end

      def register(type, name, help)
        metric = type == :histogram ? @registry.histogram(name, help, {}, BUCKETS_MS) : @registry.public_send(type, name, help)
        OURS_LOCK.synchronize { OURS[@registry] = (OURS[@registry] || []) + [name] }
        metric
      end

      def prometheus_name(name, type) = :"#{@namespace}_#{name.tr(".", "_")}#{"_total" if type == :counter}"
    end
  end
end
