# frozen_string_literal: true

module Sluice
  module Instrumentation
    # librdkafka's statistics and sluice's events as StatsD metrics, sent by a
    # statsd-ruby client (Debian: ruby-statsd); .new shows how to subscribe one.
    #
    # Names are Metrics' names under the namespace (sluice.network.latency.avg);
    # counts are |c, gauges |g, timings |ms. Plain StatsD has no tags, so
    # statsd-ruby sends them in the name, as the servers that read tags there
    # expect: tag_format :influxdb (name,tag=value — Telegraf, statsd_exporter)
    # or :graphite (name;tag=value — Graphite 1.1). With :dogstatsd the
    # client is a DogStatsD one (dogstatsd-ruby, as WaterDrop's listener
    # takes) and gets the tags as tags: ["key:value", ...].
    class StatsdListener
      include MetricsListener

      # What to install when statsd is missing (the LoadError says it).
      PACKAGE = "ruby-statsd (gem statsd-ruby)"
      # What comes before each tag=value in a metric's name, by tag_format.
      SEPARATORS = { influxdb: ",", graphite: ";" }.freeze
      # The tag_format values .new accepts.
      TAG_FORMATS = [*SEPARATORS.keys, :dogstatsd].freeze
      # What a tag in a name cannot hold: the line's own separators.
      RESERVED = /[,;=:|@#\s]/

      # The client the metrics are sent through (the one given, or the one built from host and port).
      attr_reader :client

      # Subscribe it to the monitor of each client to measure.
      # @param client [Statsd] a statsd-ruby client (or a DogStatsD client with
      #   tag_format: :dogstatsd); default: Statsd.new(host, port)
      # @param host [String] the StatsD server, when no client is given
      # @param port [Integer] its UDP port
      # @param namespace [String, nil] the metric names' prefix
      # @param tags [Hash{Symbol => String}] added to every sample (say, host:)
      # @param tag_format [Symbol] :influxdb, :graphite or :dogstatsd
      # @param deliveries [Boolean] also count every delivered message
      #   (message.acknowledged: an event per message; see Deliveries)
      # @raise [ArgumentError] tag_format is none of TAG_FORMATS
      # @raise [LoadError] no client is given and statsd-ruby is not installed (the message names the package)
      # @example A statsd-ruby client; tags go in the names, InfluxDB style
      #   monitor.subscribe(Sluice::Instrumentation::StatsdListener.new(client: Statsd.new("127.0.0.1", 8125), tags: { app: "billing" }))
      # @example A DogStatsD client (dogstatsd-ruby) gets the tags as tags
      #   monitor.subscribe(Sluice::Instrumentation::StatsdListener.new(client: Datadog::Statsd.new("127.0.0.1", 8125), tag_format: :dogstatsd))
      def initialize(client: nil, host: "127.0.0.1", port: 8125, namespace: "sluice", tags: {}, tag_format: :influxdb,
                     deliveries: false)
        raise ArgumentError, "tag_format must be one of #{TAG_FORMATS.inspect}, not #{tag_format.inspect}" unless TAG_FORMATS.include?(tag_format)

        MetricsListener.require_library("statsd", PACKAGE) unless client
        @client = client || ::Statsd.new(host, port)
        @prefix = namespace ? "#{namespace}." : ""
        @tags = tags
        @tag_format = tag_format
        setup_metrics(deliveries)
      end

      private

      # A statistics emission is dozens of samples: statsd-ruby batches them
      # into a few packets instead of one each.
      def write(samples)
        return super if @tag_format == :dogstatsd || !@client.respond_to?(:batch)

        @client.batch { |batch| samples.each { |sample| send_to(batch, sample) } }
      end

      def record(sample) = send_to(@client, sample)

      def send_to(client, sample)
        tags = @tags.merge(sample.tags)
        if @tag_format == :dogstatsd
          client.public_send(sample.type, "#{@prefix}#{sample.name}", sample.value, tags: tags.map { |key, value| "#{key}:#{value}" })
        else
          client.public_send(sample.type, "#{@prefix}#{sample.name}#{tagged(tags)}", sample.value)
        end
      end

      def tagged(tags)
        separator = SEPARATORS.fetch(@tag_format)
        tags.map { |key, value| "#{separator}#{key}=#{value.to_s.gsub(RESERVED, "_")}" }.join
      end
    end
  end
end
