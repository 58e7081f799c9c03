# frozen_string_literal: true

require "logger"
require "securerandom"

module Sluice
  module Shared
    # What the settings of every client (Producer, Consumer) have: librdkafka
    # properties, an id, the logger, the monitor and how events are polled.
    # Filled in the block given to .new and frozen once valid.
    class ClientConfig
      # How a client's librdkafka events (delivery reports, errors, statistics,
      # OAuth refresh, logs) are polled.
      class Polling
        # The values #mode takes.
        MODES = %i[fd thread].freeze

        # :fd settings: how long one client may be drained per wake-up (ms), and
        # how often every client is polled even when its pipe is silent (ms).
        FD = Struct.new(:max_time, :periodic_poll_interval)

        # :fd (default) — one poller thread for many clients; :thread — one thread per client.
        attr_accessor :mode
        # A dedicated Sluice::Polling::Poller (:fd only); nil uses Poller.instance.
        attr_accessor :poller
        # @return [FD] the :fd mode's settings (max_time, periodic_poll_interval)
        attr_reader :fd

        def initialize
          @mode = :fd
          @poller = nil
          @fd = FD.new(100, 1_000)
        end

        # Freezes the :fd settings too.
        # @return [self]
        def freeze
          @fd.freeze
          super
        end
      end

      # librdkafka properties, Symbol or String keys.
      attr_accessor :kafka
      # Names the client in events and thread names; default: a unique generated id.
      attr_accessor :id
      # Receives librdkafka's log lines.
      attr_accessor :logger
      # A Sluice::Monitor to share between clients; default: one per client.
      attr_accessor :monitor
      # @return [Polling] how this client's events are polled
      attr_reader :polling

      def initialize
        @kafka = {}
        @id = "sluice-#{SecureRandom.hex(6)}"
        @logger = Logger.new($stderr, level: Logger::WARN, progname: "sluice")
        @monitor = nil
        @polling = Polling.new
      end

      # Checks every setting (called by .new before it freezes the config).
      # @return [self]
      # @raise [Errors::ConfigurationInvalidError] naming the first bad setting
      def validate!
        validate_kafka!
        invalid!("id must be a non-empty String") unless @id.is_a?(String) && !@id.empty?
        invalid!("logger must respond to #add (Logger.new(nil) discards librdkafka's logs)") unless @logger.respond_to?(:add)
        validate_polling!
        self
      end

      # What librdkafka gets.
      # @return [Array<Array(String, String)>] the librdkafka properties, names and values as Strings
      def kafka_pairs
        @kafka.map { |name, value| [name.to_s, value.to_s] }
      end

      # @param name [String] a librdkafka property, e.g. "transactional.id"
      # @return [String, nil] its value as given (whether its key was a Symbol or a String), as a String;
      #   of a name given twice (as a Symbol and as a String), the last one, which librdkafka keeps
      def kafka_setting(name)
        @kafka.reverse_each { |key, value| return value.to_s if key.to_s == name }
        nil
      end

      # @param name [String] a property sluice acts on (a key of KafkaProperty::ALL), e.g. "enable.auto.commit"
      # @return [Boolean, Integer, String, nil] its value as librdkafka reads it, its default when not given
      def kafka_value(name) = Shared::KafkaProperty::ALL.fetch(name).read(kafka_setting(name))

      # A copy with other librdkafka properties, validated and frozen.
      # @param kafka [Hash] the librdkafka properties of the copy
      # @return [Shared::ClientConfig] of the same class
      # @raise [Errors::ConfigurationInvalidError]
      def with_kafka(kafka)
        copy = dup
        copy.kafka = kafka
        copy.validate!.freeze
      end

      # Every setting, secrets shown as [FILTERED] (Shared::Secrets): what reaches a
      # log, an error tracker or an exception's message (a NoMethodError for a
      # mistyped setting names the config) never holds a password.
      # @return [String]
      def inspect
        settings = instance_variables.map do |name|
          value = instance_variable_get(name)
          shown = case value
                  when Hash then name == :@kafka ? Shared::Secrets.filter(value).inspect : value.inspect
                  when Logger, Monitor then "#<#{value.class.name}>" # their state is no setting, and long
                  else value.inspect
                  end
          "#{name.to_s.delete_prefix("@")}=#{shown}"
        end
        "#<#{self.class.name} #{settings.join(", ")}>"
      end

      # pp shows #inspect (its default lists the instance variables as they are).
      def pretty_print(printer) = printer.text(inspect)

      # Freezes the librdkafka properties and the polling settings too: a
      # client's settings never change under it.
      # @return [self]
      def freeze
        @kafka = @kafka.dup.freeze
        @polling.freeze
        super
      end

      private

      def validate_kafka!
        invalid!("kafka must be a Hash of librdkafka properties, got #{@kafka.class}") unless @kafka.is_a?(Hash)
        @kafka.each do |name, value|
          invalid!("kafka property names must be Symbols or Strings, got #{name.inspect}") unless name.is_a?(Symbol) || name.is_a?(String)
          invalid!("kafka property #{name.inspect} contains a NUL byte") if name.to_s.include?("\0") || value.to_s.include?("\0")
          next if [String, Symbol, Integer, Float, true, false].any? { |kind| kind === value } # rubocop:disable Style/CaseEquality

          invalid!("kafka property #{name} must be a String, Symbol, number or boolean, got #{value.inspect}")
        end
        validate_kafka_values!
      end

      # A value librdkafka refuses, in a property sluice acts on, is refused
      # here: sluice would read it as something (on, off, a default).
      def validate_kafka_values!
        Shared::KafkaProperty::ALL.each_key { |name| kafka_value(name) }
      rescue ArgumentError => e
        invalid!("kafka property #{e.message}")
      end

      def validate_polling!
        invalid!("polling.mode must be one of #{Polling::MODES.inspect}, got #{@polling.mode.inspect}") unless Polling::MODES.include?(@polling.mode)
        invalid!("polling.poller is for :fd mode; :thread mode polls each client in its own thread") if @polling.mode == :thread && @polling.poller
        invalid!("polling.poller must be a Sluice::Polling::Poller") if @polling.poller && !@polling.poller.is_a?(Sluice::Polling::Poller)
        positive!("polling.fd.max_time", @polling.fd.max_time)
        positive!("polling.fd.periodic_poll_interval", @polling.fd.periodic_poll_interval)
      end

      def positive!(name, value)
        invalid!("#{name} must be a positive number of milliseconds, got #{value.inspect}") unless value.is_a?(Numeric) && value.positive?
      end

      def non_negative!(name, value)
        invalid!("#{name} must be a number of milliseconds >= 0, got #{value.inspect}") unless value.is_a?(Numeric) && !value.negative?
      end

      def invalid!(message)
        raise Errors::ConfigurationInvalidError, @kafka.is_a?(Hash) ? Shared::Secrets.scrub(message, @kafka) : message
      end
    end
  end
end
