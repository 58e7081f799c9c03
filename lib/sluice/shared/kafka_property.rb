# frozen_string_literal: true

module Sluice
  module Shared
    # A librdkafka property whose value sluice acts on itself, read the way
    # librdkafka reads it (rdkafka_conf.c, rd_kafka_anyconf_set_prop): where
    # sluice reads "enable.auto.commit": "0" as on while librdkafka reads it as
    # off, sluice commits what the application meant to commit in its own
    # transaction. A value librdkafka cannot read is refused here too, before
    # the client is built (and for the in-memory producer clients, which never
    # ask librdkafka).
    class KafkaProperty
      # librdkafka's spellings of a boolean: these case-insensitively, "1" and "0" as they are.
      TRUE_WORDS = %w[true t].freeze
      FALSE_WORDS = %w[false f].freeze
      # isspace(3): what strtol and librdkafka's left trim skip.
      SPACE = /\A[ \t\n\v\f\r]*/
      # What strtol(value, &end, 0) reads of a number: its base from its prefix, then digits up to the first that is not one.
      STRTOL = /\A[+-]?(?:0[xX]\h+|0[0-7]*|[1-9]\d*)/
      # C's long and int: strtol saturates at the first, librdkafka then casts to the second.
      LONG = (-2**63..(2**63) - 1)
      INT = 2**32
      private_constant :TRUE_WORDS, :FALSE_WORDS, :SPACE, :STRTOL, :LONG, :INT

      # @return [String] the property's name, as librdkafka spells it
      attr_reader :name

      # @param name [String]
      # @param type [Symbol] :boolean, :choice (a string from a fixed list), :integer or :string
      # @param default [Object] librdkafka's value when the property is not given
      # @param choices [Array<String>] a :choice's values, librdkafka's spelling
      def initialize(name, type, default: nil, choices: nil)
        @name = name
        @type = type
        @default = default
        @choices = choices
        freeze
      end

      # @param given [String, nil] the value handed to librdkafka, nil when none is
      # @return [Boolean, Integer, String, nil] the value librdkafka takes (its default when none is given)
      # @raise [ArgumentError] for a value librdkafka cannot read, saying what it takes (an integer out of
      #   the property's range is librdkafka's to refuse: a native client's construction does, and the
      #   in-memory producer clients take it, so that their specs need not wait a second for a timeout)
      def read(given)
        return @default if given.nil?
        # librdkafka takes an empty value as none: a string property goes back to its default, any other is refused.
        return @type == :string ? @default : refuse(given) if given.empty?

        send(@type, given)
      end

      private

      def boolean(given)
        word = given.downcase
        return true if given == "1" || TRUE_WORDS.include?(word)
        return false if given == "0" || FALSE_WORDS.include?(word)

        refuse(given)
      end

      def choice(given)
        word = given.sub(SPACE, "") # librdkafka trims the left side only
        @choices.find { |choice| choice.casecmp?(word) } || refuse(given)
      end

      def integer(given)
        digits = STRTOL.match(given.sub(SPACE, "")) or refuse(given)
        value = Integer(digits[0]).clamp(LONG)
        ((value + (INT / 2)) % INT) - (INT / 2) # the cast to int
      end

      def string(given) = given.sub(SPACE, "")

      def refuse(given)
        raise ArgumentError, "#{@name} must be #{expected}, got #{given.inspect}"
      end

      def expected
        case @type # a :string takes anything
        when :boolean then "true or false (librdkafka reads true, t, 1, false, f and 0, in any case)"
        when :choice then "one of #{@choices.join(", ")} (in any case)"
        else "an integer"
        end
      end

      # The properties sluice reads itself, with librdkafka's types and defaults:
      # Shared::ClientConfig#kafka_value reads them, Shared::ClientConfig#validate! checks them.
      ALL = [
        new("enable.auto.commit", :boolean, default: true),
        new("enable.auto.offset.store", :boolean, default: true),
        new("enable.idempotence", :boolean, default: false),
        new("group.protocol", :choice, default: "classic", choices: %w[classic consumer]),
        new("isolation.level", :choice, default: "read_committed", choices: %w[read_uncommitted read_committed]),
        new("transactional.id", :string),
        new("max.poll.interval.ms", :integer, default: 300_000),
        new("session.timeout.ms", :integer, default: 45_000),
        new("transaction.timeout.ms", :integer, default: 60_000)
      ].to_h { |property| [property.name, property] }.freeze
    end
  end
end
