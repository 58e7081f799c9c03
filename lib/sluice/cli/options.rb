# frozen_string_literal: true

module Sluice
  module CLI
    # What every command takes: the brokers (-b, or KAFKA_BROKERS), librdkafka
    # properties (-X, kcat's), how long a call may take and how much
    # librdkafka may say on stderr.
    class Options
      DEFAULT_TIMEOUT = 10 # s

      # @return [Numeric] --timeout, in seconds
      attr_reader :timeout

      def initialize(env)
        @env = env
        @brokers = nil
        @properties = {}
        @timeout = DEFAULT_TIMEOUT
        @log_level = Logger::WARN
      end

      # Adds the options every command takes (-b, -X, --timeout, -q, -v).
      # @param parser [OptionParser]
      def define(parser)
        parser.separator("")
        parser.separator("common options:")
        parser.on("-b", "--brokers BROKERS", "bootstrap brokers, HOST:PORT[,...] (default: $KAFKA_BROKERS)") { |value| @brokers = value }
        parser.on("-X", "--property KEY=VALUE", "a librdkafka property (repeatable)") { |pair| property(pair) }
        parser.on("--timeout SECONDS", Float, "how long one call to the brokers may take (default #{DEFAULT_TIMEOUT})") { |value| timeout!(value) }
        parser.on("-q", "--quiet", "no librdkafka log lines on stderr") { @log_level = nil }
        parser.on("-v", "--verbose", "librdkafka's informational log lines too") { @log_level = Logger::INFO }
      end

      # librdkafka properties: -X pairs, with the brokers.
      # @raise [UsageError] no broker given
      def kafka = @properties.merge("bootstrap.servers" => brokers)

      # @return [Integer] --timeout (seconds) in ms
      def timeout_ms = (@timeout * 1000).round

      def brokers
        found = @brokers || @properties["bootstrap.servers"] || @env["KAFKA_BROKERS"]
        raise UsageError, "no brokers: give -b HOST:PORT or set KAFKA_BROKERS" if found.nil? || found.strip.empty?

        found
      end

      # A logger on stderr at the level -v chose (-q: one discarding everything).
      # @param stderr [IO]
      # @return [Logger]
      def logger(stderr)
        return Logger.new(nil) unless @log_level

        Logger.new(stderr, level: @log_level, formatter: ->(_, _, _, message) { "sluice: librdkafka: #{message}\n" })
      end

      private

      def property(pair)
        name, value = pair.split("=", 2)
        return @properties[name] = value unless value.nil? || name.empty?

        shown = Secrets.sensitive?(pair) ? "#{pair[/\A[\w.-]*/]}... (the rest not shown: it may hold a secret)" : pair.inspect
        raise UsageError, "-X takes KEY=VALUE, got #{shown}"
      end

      def timeout!(value)
        raise UsageError, "--timeout takes a positive number of seconds, got #{value}" unless value.positive? && value.finite?

        @timeout = value
      end
    end
  end
end
