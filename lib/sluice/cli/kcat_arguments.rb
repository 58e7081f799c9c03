# frozen_string_literal: true

module Sluice
  module CLI
    # The command lines kcat users already type, rewritten into sluice's:
    #
    # - kcat's modes: `-P` is produce, `-C` tail, `-L` topics (describe with
    #   -t), `-Q` offsets, `-G GROUP TOPIC` tail as a group member; `-t` names
    #   the topic and every other flag goes to that command (kcat's -z, -m, -d
    #   and -E become their sluice equivalents);
    # - sluice's own commands with the common flags in front
    #   (`sluice -b B topics`), as git and kubectl take them;
    # - a kcat line with -t and no mode picks kcat's: tail when stdin is a
    #   terminal, else produce; and -V and -h among kcat's flags are
    #   --version and help.
    #
    # Anything else is left alone, so the command's parser names what it
    # does not take.
    module KcatArguments
      # kcat's mode flags and the command each becomes.
      MODES = { "-P" => "produce", "-C" => "tail", "-L" => "topics", "-Q" => "offsets" }.freeze
      # kcat's flags that take a value (the next argument, or the rest of the same one: -tname).
      VALUED = %w[-b -t -p -D -K -k -c -o -f -H -X -F -G -z -m -d -s -r -M].freeze
      # sluice's common flags that take a value, as they may come before the command.
      COMMON_VALUED = %w[-b --brokers -X --property -F --properties-file --timeout].freeze
      # sluice's long flags that take a value (the next argument), as they may mix with kcat's.
      LONG_VALUED = %w[--brokers --property --properties-file --timeout --offset --count --format --key-delimiter --delimiter
                       --partition --group --key --header --compression --file --progress].freeze
      # kcat flags sluice has no counterpart for, and why.
      UNSUPPORTED = {
        "-s" => "deserializers (-s) are not supported: values are printed as bytes",
        "-r" => "the schema registry (-r) is not supported",
        "-M" => "librdkafka's mock cluster (-M) is not supported: start a broker (bin/kafka start in sluice's repository)",
        "-O" => "-O is not supported: use -f '%o%k%s\\n' or -J for offsets"
      }.freeze
      # What the note says of the mode a line without one gets (kcat's "Auto-selecting ... mode").
      CONSUMING = "consuming (stdin is a terminal)"
      # (see CONSUMING)
      PRODUCING = "producing stdin's lines (stdin is not a terminal)"

      module_function

      # @param argv [Array<String>]
      # @param tty [Boolean] stdin is a terminal: the mode of a kcat line without one (kcat's rule)
      # @param note [#call, nil] told (a line for stderr) which mode such a line got, as kcat tells it
      # @return [Array<String>] argv as sluice's parser takes it: the command first
      # @raise [UsageError] a kcat line that cannot be rewritten (no topic, a mode sluice lacks)
      def translate(argv, tty: false, note: nil)
        return argv if argv.empty? || COMMANDS.key?(argv.first) || %w[help -h --help -V --version].include?(argv.first)

        flags = split(argv)
        return kcat(flags) if flags.modes.any? || flags.group || flags.pairs.any? { |flag, _| UNSUPPORTED.key?(flag) }

        common_first(argv) || modeless(flags, tty, note) || argv
      end

      # A kcat line without a mode: -V and -h ask for the version and the
      # usage (kcat answers them before anything else); with -t, kcat's own
      # choice of mode: consume when stdin is a terminal (a person typing),
      # else produce what is piped in; said on note, as a surprise otherwise
      # (a forgotten -C in a script reads stdin). nil: not a kcat line.
      def modeless(flags, tty, note)
        return ["--version"] if flags.pairs.assoc("-V")
        return ["help"] if flags.pairs.assoc("-h")
        return unless flags.pairs.assoc("-t")

        quiet = flags.pairs.any? { |flag, _| %w[-q --quiet].include?(flag) } # kcat's -q silences its note too
        note&.call("sluice: no -P or -C given: #{tty ? CONSUMING : PRODUCING}") unless quiet
        kcat(flags, tty ? "-C" : "-P")
      end

      # kcat's argv as its mode, its flags ([flag, value] pairs, in order) and its other arguments.
      Flags = Struct.new(:modes, :pairs, :positional, :group)

      # @return [Flags] argv taken apart as kcat's getopt would
      def split(argv)
        flags = Flags.new([], [], [], nil)
        args = argv.dup
        while (arg = args.shift)
          next flags.positional.concat(args.shift(args.size)) if arg == "--"
          next flags.positional << arg unless arg.b.match?(/\A--?[A-Za-z]/)

          short(arg, args, flags)
        end
        flags
      end

      # One kcat flag (a long one is passed through as it is): a mode, or a flag
      # with its value (-tname and -t name alike).
      def short(arg, args, flags)
        flag = arg[0, 2]
        return flags.modes << flag if MODES.key?(arg)
        return flags.pairs << [arg, args.shift] if LONG_VALUED.include?(arg) && !args.empty?
        return flags.pairs << [arg, nil] if arg.start_with?("--") || !VALUED.include?(flag)

        value = arg.size > 2 ? arg[2..] : args.shift
        raise UsageError, "#{flag} takes a value" if value.nil?
        return flags.group = value if flag == "-G"

        flags.pairs << [flag, value]
      end

      # @param default_mode [String] the mode when the line names none (-G GROUP TOPIC's: -C)
      # @return [Array<String>] a kcat command line in sluice's shape
      def kcat(flags, default_mode = "-C")
        raise UsageError, "one of -P, -C, -L, -Q at a time, got #{flags.modes.join(" ")}" if flags.modes.size > 1

        return ["--version"] if flags.pairs.assoc("-V") # kcat answers -V before anything else

        mode = flags.modes.first || default_mode
        flags.pairs.each { |flag, _| raise UsageError, UNSUPPORTED.fetch(flag) if UNSUPPORTED.key?(flag) }
        topics = flags.pairs.filter_map { |flag, value| value if flag == "-t" }
        pairs = flags.pairs.reject { |flag, _| flag == "-t" }.flat_map { |flag, value| renamed(mode, flag, value) }
        command(mode, topics, flags) + pairs
      end

      # @return [Array<String>] the sluice command and its positional arguments for a kcat mode
      def command(mode, topics, flags)
        case mode
        when "-P" then ["produce", one_topic(topics, "-P")] + files(flags.positional, flags.pairs.assoc("-l"))
        when "-C" then tail(topics + flags.positional, flags.group)
        when "-L" then topics.empty? ? ["topics"] : ["describe", one_topic(topics, "-L")]
        else ["offsets", *topics]
        end
      end

      # @return [Array<String>] tail of the one topic, as a member of group when given (kcat -G)
      def tail(topics, group)
        command = ["tail", one_topic(topics, group ? "-G" : "-C")]
        group ? command + ["-G", group] : command
      end

      def one_topic(topics, mode)
        raise UsageError, "#{mode} needs a topic: -t TOPIC" if topics.empty?
        raise UsageError, "#{mode}: sluice reads or writes one topic at a time, got #{topics.join(", ")}" if topics.size > 1

        topics.first
      end

      # kcat -P -l FILE reads FILE's lines as it reads stdin's: sluice's --file.
      # (Without -l kcat sends each file whole as one message, which sluice does not.)
      def files(paths, lines)
        return [] if paths.empty?
        raise UsageError, "-P FILE: sluice reads a file's lines (kcat's -l FILE), not a file as one message: add -l" unless lines
        raise UsageError, "-P -l: one input file, got #{paths.join(", ")}" if paths.size > 1

        ["--file", paths.first]
      end

      # kcat's flags sluice spells otherwise; the rest go as they are.
      def renamed(mode, flag, value)
        case flag
        when "-z" then ["-X", "compression.codec=#{value}"]
        when "-m" then ["--timeout", value]
        when "-d" then ["-X", "debug=#{value}"]
        when "-E", "-l" then [] # -E: sluice does not exit on non-fatal errors anyway; -l: the file argument says it
        when "-p" then mode == "-P" && value == "-1" ? [] : [flag, value] # -p -1: librdkafka's partitioner, sluice's default
        else value.nil? ? [flag] : [flag, value]
        end
      end

      # sluice's shape with the common flags first: the first argument that is
      # not a flag or a flag's value is the command, moved to the front.
      # nil: no command there.
      def common_first(argv)
        index = 0
        index += COMMON_VALUED.include?(argv[index]) ? 2 : 1 while index < argv.size && argv[index].start_with?("-")
        return unless index < argv.size && COMMANDS.key?(argv[index])

        [argv[index], *argv[0...index], *argv[(index + 1)..]]
      end
    end
  end
end
