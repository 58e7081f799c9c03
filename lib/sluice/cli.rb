# frozen_string_literal: true

require "optparse"
require "json"
require "time"
require_relative "../sluice"
require_relative "cli/usage_error"
require_relative "cli/escapes"
require_relative "cli/kcat_arguments"
require_relative "cli/options"
require_relative "cli/broker_probe"
require_relative "cli/command"
require_relative "cli/start_offset"
require_relative "cli/time_argument"
require_relative "cli/message_format"
require_relative "cli/input_line"
require_relative "cli/input_reader"
require_relative "cli/produce_report"
require_relative "cli/deliveries"
require_relative "cli/line_deliveries"
require_relative "cli/table"
require_relative "cli/commands/topics"
require_relative "cli/commands/describe"
require_relative "cli/commands/create"
require_relative "cli/commands/groups"
require_relative "cli/commands/delete_group"
require_relative "cli/commands/lag"
require_relative "cli/commands/reset"
require_relative "cli/commands/produce"
require_relative "cli/commands/tail"
require_relative "cli/commands/offsets"
require_relative "cli/commands/bench"
require_relative "cli/commands/dlq"

module Sluice
  # `sluice`, the command line (exe/sluice): topics, groups and messages from a
  # shell, with kcat's flags where kcat has one. Built on the public API only.
  # Exit codes: 0 done, 1 a Kafka or operation error, 2 a usage error, 128 + n
  # on signal n (130 for Ctrl-C).
  # The Ruby side is internal: the interface is the command (docs/CLI.md).
  # @api private
  module CLI
    # Where a command reads and writes: stdout is for data, stderr for the rest.
    IOs = Struct.new(:stdin, :stdout, :stderr)

    # Each command's name and class.
    COMMANDS = {
      "topics" => Commands::Topics, "describe" => Commands::Describe, "create" => Commands::Create,
      "produce" => Commands::Produce, "tail" => Commands::Tail, "groups" => Commands::Groups,
      "lag" => Commands::Lag, "reset" => Commands::Reset, "delete-group" => Commands::DeleteGroup,
      "offsets" => Commands::Offsets, "bench" => Commands::Bench, "dlq" => Commands::Dlq
    }.freeze

    # Exit codes: done, and a usage error.
    OK = 0
    # (see OK)
    USAGE = 2

    module_function

    # Runs one command line.
    # @param argv [Array<String>] the command and its arguments
    # @return [Integer] the exit code
    def start(argv, streams: IOs.new($stdin, $stdout, $stderr), env: ENV)
      argv = translated(argv, streams) or return USAGE
      name, *rest = argv
      case name
      when "-h", "--help", "help" then help(rest.first, streams)
      when "-V", "--version" then streams.stdout.puts(version) || OK
      else
        command = COMMANDS[name] or return unknown(name, streams)
        command.new(name, streams, env).call(rest)
      end
    end

    # argv in sluice's shape (KcatArguments), or nil after telling why it has none.
    def translated(argv, streams)
      KcatArguments.translate(argv, tty: streams.stdin.tty?, note: streams.stderr.method(:puts))
    rescue UsageError => e
      streams.stderr.puts("sluice: #{e.message}")
      streams.stderr.puts(usage)
      nil
    end

    # @return [String] the general usage: every command and its summary
    def usage
      width = COMMANDS.keys.map(&:size).max
      lines = COMMANDS.map { |name, command| format("  %-#{width}s  %s", name, command::SUMMARY) }
      "usage: sluice COMMAND [options] (sluice help COMMAND for its options)\n" \
        "       sluice -P|-C|-L|-Q -t TOPIC [kcat's options] (kcat's command lines: docs/CLI.md)\n\ncommands:\n#{lines.join("\n")}\n\n" \
        "Brokers come from -b HOST:PORT[,...] or KAFKA_BROKERS. Exit codes: 0 done, 1 a Kafka error, 2 a usage error, 130 interrupted."
    end

    # @return [String] what `sluice --version` prints
    def version = "sluice #{VERSION} (librdkafka #{Sluice.librdkafka_version})"

    # Prints a command's help, or the general usage without a name.
    # @return [Integer] the exit code
    def help(name, streams)
      command = COMMANDS[name]
      return unknown(name, streams) if name && !command

      streams.stdout.puts(command ? command.new(name, streams, {}).help : usage)
      OK
    end

    # Prints the usage to stderr for a missing or unknown command.
    # @return [Integer] the usage-error exit code
    def unknown(name, streams)
      streams.stderr.puts(name ? "sluice: unknown command #{name.inspect}" : "sluice: no command given")
      streams.stderr.puts(usage)
      USAGE
    end
  end
end
