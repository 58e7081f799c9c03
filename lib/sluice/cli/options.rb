# frozen_string_literal: true

module Sluice
  module CLI
    # What every command takes: the brokers (-b, or KAFKA_BROKERS), librdkafka
    # properties (-X and -F FILE, kcat's; a default file named by
    # SLUICE_CONFIG or kcat's KCAT_CONFIG), how long a call may take and how
    # much librdkafka may say on stderr.
    class Options
      DEFAULT_TIMEOUT = 10 # s
      # The environment variables naming a properties file read before any flag (the first set wins).
      CONFIG_VARIABLES = %w[SLUICE_CONFIG KCAT_CONFIG].freeze

      # @return [Numeric] --timeout, in seconds
      attr_reader :timeout

      def initialize(env)
        @env = env
        @brokers = nil
        @properties = {}
        @pairs_given = 0 # -X pairs so far: a malformed one is named by its place
        @defaults = nil # the properties of the file SLUICE_CONFIG names, read when first needed
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
        parser.on("-F", "--properties-file FILE", "librdkafka properties from a file: KEY=VALUE lines, # comments",
                  "(default: the file $SLUICE_CONFIG or $KCAT_CONFIG names; -X and -F given later win)") { |path| read_file(path) }
        parser.on("--timeout SECONDS", Float, "how long one call to the brokers may take (default #{DEFAULT_TIMEOUT})") { |value| timeout!(value) }
        parser.on("-q", "--quiet", "no librdkafka log lines on stderr") { @log_level = nil }
        parser.on("-v", "--verbose", "librdkafka's informational log lines too") { @log_level = Logger::INFO }
      end

      # librdkafka properties: -X pairs, with the brokers.
      # @raise [UsageError] no broker given
      def kafka = defaults.merge(@properties, "bootstrap.servers" => brokers)

      # @return [Integer] --timeout (seconds) in ms
      def timeout_ms = (@timeout * 1000).round

      def brokers
        found = @brokers || @properties["bootstrap.servers"] || defaults["bootstrap.servers"] || @env["KAFKA_BROKERS"]
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
        @pairs_given += 1
        name, value = split(pair)
        raise UsageError, "-X takes KEY=VALUE: #{malformed(pair, "-X number #{@pairs_given}")}" unless name

        @properties[name] = value
      end

      # kcat's properties file: KEY=VALUE lines; blank lines and lines
      # starting with # skipped; whitespace around a line ignored.
      def read_file(path, into = @properties)
        File.foreach(path).with_index(1) do |line, number|
          line = line.strip
          next if line.empty? || line.start_with?("#")

          name, value = split(line)
          raise UsageError, "#{path}:#{number}: expected KEY=VALUE: #{malformed(line, "the line")}" unless name

          into[name] = value
        end
        into
      rescue SystemCallError, IOError => e
        raise UsageError, "cannot read the properties file #{path}: #{e.message.sub(/ @ \w+ - .*/, "")}"
      end

      def defaults
        @defaults ||= CONFIG_VARIABLES.lazy.map { |name| @env[name] }.find { |path| path && !path.empty? }&.then { |path| read_file(path, {}) } || {}
      end

      # @return [Array(String, String), nil] a KEY=VALUE pair's name and value (the value may hold "=")
      def split(pair)
        name, value = pair.split("=", 2)
        value.nil? || name.empty? ? nil : [name, value]
      end

      # What a property name looks like (librdkafka's are dotted lowercase
      # words), followed by what a typo puts in place of "=".
      NAME_THEN_SEPARATOR = /\A([a-z][a-z0-9_-]*(?:\.[a-z0-9_-]+)+)[:\s]/

      # A malformed pair named without its value: a secret may be anywhere in
      # it (its value, or all of it with no name), so only a plausible
      # property name before a separator is shown, else where it was.
      def malformed(pair, where)
        name = pair[NAME_THEN_SEPARATOR, 1]
        return "got #{name}... (the rest not shown: it may hold a secret)" if name

        "#{where} is not one (not shown: it may hold a secret)"
      end

      # The longest --timeout (s): librdkafka's timeouts are int32 milliseconds.
      MAX_TIMEOUT = ((2**31) - 1) / 1000

      def timeout!(value)
        unless value.positive? && value <= MAX_TIMEOUT
          raise UsageError, "--timeout takes a positive number of seconds up to #{MAX_TIMEOUT}, got #{value}"
        end

        @timeout = value
      end
    end
  end
end
