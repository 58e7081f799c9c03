# frozen_string_literal: true

module Sluice
  module CLI
    # One subcommand: its options (OptionParser, the common ones included),
    # its arguments, and the exit code its outcome maps to. A subclass sets
    # SUMMARY and ARGUMENTS, adds its options in #define and does its work
    # in #run, returning an exit code (nil: 0).
    class Command
      # Exit codes: a Kafka or operation error, a usage error.
      FAILED = 1
      # (see FAILED)
      USAGE = 2
      PIPE_CLOSED = 141 # 128 + SIGPIPE: the reader of stdout went away (sluice tail | head)
      # The positional arguments, as the usage line shows them ([NAME] is optional).
      ARGUMENTS = ""
      # What a timed-out or unreachable call most often means from a shell.
      UNREACHABLE = %i[timed_out request_timed_out all_brokers_down transport resolve].freeze

      # @return [Options] the common options, as parsed
      attr_reader :options

      def initialize(name, streams, env)
        @name = name
        @io = streams
        @options = Options.new(env)
      end

      # Parses argv and runs the command.
      # @return [Integer] the exit code
      def call(argv)
        valid_text!(argv)
        outcome = run(*arguments(parser.parse(argv)))
        outcome.is_a?(Integer) ? outcome : 0
      rescue UsageError, OptionParser::ParseError => e
        usage_error(e.message)
      rescue Errors::ConfigurationInvalidError => e # a -X property librdkafka does not take
        warn_line("sluice #{@name}: invalid setting: #{e.message}")
        USAGE
      rescue Errors::BaseError => e
        failed(e)
      rescue BrokerProbe::Unreachable => e
        warn_line("sluice #{@name}: #{e.message}")
        FAILED
      rescue Errno::EPIPE
        PIPE_CLOSED
      rescue SignalException => e # Ctrl-C (Interrupt) or SIGTERM: the clients were closed on the way out
        128 + e.signo
      end

      # @return [String] the command's usage line, summary and options
      def help = parser.help

      private

      def parser
        @parser ||= OptionParser.new do |parser|
          parser.banner = "usage: sluice #{@name} #{self.class::ARGUMENTS}".rstrip
          parser.separator(self.class::SUMMARY)
          define(parser)
          @options.define(parser)
        end
      end

      def define(_parser) = nil

      # The positional arguments run takes, as many as ARGUMENTS names (a [NAME] is optional).
      def arguments(args)
        names = self.class::ARGUMENTS.split
        required = names.count { |name| !name.start_with?("[") }
        raise UsageError, "missing #{names[args.size..required - 1].join(" ")}" if args.size < required
        raise UsageError, "unexpected argument #{args[names.size].inspect}" if args.size > names.size

        args
      end

      def usage_error(message)
        warn_line("sluice #{@name}: #{message}")
        warn_line(help)
        USAGE
      end

      def failed(error)
        hint = " (are the brokers at #{@options.brokers} reachable?)" if error.respond_to?(:code) && UNREACHABLE.include?(error.code)
        warn_line("sluice #{@name}: #{error.class.name}: #{error.message}#{hint}")
        FAILED
      end

      def out(line) = @io.stdout.puts(line)

      def warn_line(line) = @io.stderr.puts(line)

      def logger = @logger ||= @options.logger(@io.stderr)

      # The librdkafka properties for a client, once a bootstrap broker
      # answered (the first call probes them: BrokerProbe).
      # @raise [BrokerProbe::Unreachable]
      def kafka
        @reachable ||= BrokerProbe.new(@options.brokers, @options.timeout).check! || true
        @options.kafka
      end

      def with_admin
        admin = Admin.new do |config|
          config.kafka = kafka
          config.max_wait_timeout = @options.timeout_ms
          config.logger = logger
        end
        yield admin
      ensure
        admin&.close
      end

      # -p's partition number.
      # @raise [UsageError] not an integer from 0 to MAX_COUNT
      def partition(text)
        number = Integer(text, 10, exception: false)
        raise UsageError, "-p takes a partition number from 0 to #{MAX_COUNT}, got #{text.inspect}" unless number&.between?(0, MAX_COUNT)

        number
      end

      # Every argument is text (UTF-8): a byte sequence that is not made optparse raise.
      # Named by its place only: it may be a -X pair's secret.
      # @raise [UsageError] naming the first that is not
      def valid_text!(argv)
        bad = argv.index { |arg| !arg.dup.force_encoding(Encoding::UTF_8).valid_encoding? }
        raise UsageError, "argument #{bad + 1} is not valid UTF-8 (not shown: it may hold a secret)" if bad
      end

      # The largest count a flag takes (int32: what librdkafka and Kafka count partitions and messages in).
      MAX_COUNT = (2**31) - 1

      def positive_integer(value, flag)
        number = Integer(value, 10, exception: false)
        raise UsageError, "#{flag} takes a positive integer up to #{MAX_COUNT}, got #{value.inspect}" unless number&.between?(1, MAX_COUNT)

        number
      end
    end
  end
end
