# frozen_string_literal: true

require "logger"
require "securerandom"

module Sluice
  # Settings of one producer, filled in the block given to Producer.new and
  # frozen once it is valid.
  class Config
    # How the producer's librdkafka events (delivery reports, errors,
    # statistics, OAuth refresh, logs) are polled.
    class Polling
      MODES = %i[fd thread].freeze

      # :fd settings: how long one producer may be drained per wake-up (ms), and
      # how often every producer is polled even when its pipe is silent (ms).
      FD = Struct.new(:max_time, :periodic_poll_interval)

      # :fd (default) — one poller thread for many producers; :thread — one thread per producer.
      attr_accessor :mode
      # A dedicated Sluice::Polling::Poller (:fd only); nil uses Poller.instance.
      attr_accessor :poller
      attr_reader :fd

      def initialize
        @mode = :fd
        @poller = nil
        @fd = FD.new(100, 1_000)
      end

      def freeze
        @fd.freeze
        super
      end
    end

    # librdkafka properties, Symbol or String keys.
    attr_accessor :kafka
    # Names the producer in events and thread names; default: a unique generated id.
    attr_accessor :id
    # Default wait (ms) of produce_sync and DeliveryHandle#wait, and how long
    # #close waits for outstanding deliveries (and an open transaction) before
    # it purges what is left.
    attr_accessor :max_wait_timeout
    # On a full local queue: wait for room (true) or raise (false); how long between
    # attempts and in total (ms).
    attr_accessor :wait_on_queue_full, :wait_backoff_on_queue_full, :wait_timeout_on_queue_full
    # Fatal errors (the native client is dead: fenced, idempotence broken,
    # rd_kafka_fatal_error) are always raised. With these set, the producer
    # also rebuilds its native client so the next call works: a transactional
    # one after the failed transaction, an idempotent one before retrying the
    # produce that met the error. Bounded: attempts, and a backoff (ms) after
    # each reload. Codes in non_reloadable_errors never reload (a fenced
    # producer was replaced by another one with its transactional.id).
    attr_accessor :reload_on_transaction_fatal_error, :wait_backoff_on_transaction_fatal_error,
                  :max_attempts_on_transaction_fatal_error,
                  :reload_on_idempotent_fatal_error, :wait_backoff_on_idempotent_fatal_error,
                  :max_attempts_on_idempotent_fatal_error, :non_reloadable_errors
    # Before aborting a transaction, wait up to this long (ms) for its first
    # delivery report: an abort while librdkafka still registers the first
    # partition with the coordinator can fail fatally with invalid_txn_state
    # (librdkafka issue 4849). 0 (default) aborts at once.
    attr_accessor :wait_timeout_on_transaction_abort
    # Receives librdkafka's log lines.
    attr_accessor :logger
    # A Sluice::Monitor to share between producers; default: one per producer.
    attr_accessor :monitor
    attr_reader :polling

    def initialize
      @kafka = {}
      @id = "sluice-#{SecureRandom.hex(6)}"
      @max_wait_timeout = 5_000
      @wait_on_queue_full = true
      @wait_backoff_on_queue_full = 100
      @wait_timeout_on_queue_full = 10_000
      @reload_on_transaction_fatal_error = false
      @wait_backoff_on_transaction_fatal_error = 1_000
      @max_attempts_on_transaction_fatal_error = 10
      @reload_on_idempotent_fatal_error = false
      @wait_backoff_on_idempotent_fatal_error = 5_000
      @max_attempts_on_idempotent_fatal_error = 5
      @non_reloadable_errors = %i[fenced]
      @wait_timeout_on_transaction_abort = 0
      @logger = Logger.new($stderr, level: Logger::WARN, progname: "sluice")
      @monitor = nil
      @polling = Polling.new
    end

    # @raise [Errors::ConfigurationInvalidError] naming the first bad setting
    def validate!
      validate_kafka!
      invalid!("id must be a non-empty String") unless @id.is_a?(String) && !@id.empty?
      positive!(:max_wait_timeout, @max_wait_timeout)
      positive!(:wait_backoff_on_queue_full, @wait_backoff_on_queue_full)
      positive!(:wait_timeout_on_queue_full, @wait_timeout_on_queue_full)
      validate_fatal_error_handling!
      invalid!("logger must respond to #add (Logger.new(nil) discards librdkafka's logs)") unless @logger.respond_to?(:add)
      validate_polling!
      self
    end

    # librdkafka properties as [[String, String], ...]
    def kafka_pairs
      @kafka.map { |name, value| [name.to_s, value.to_s] }
    end

    def kafka_setting(name)
      @kafka.each { |key, value| return value.to_s if key.to_s == name }
      nil
    end

    def freeze
      @kafka = @kafka.dup.freeze
      @non_reloadable_errors = @non_reloadable_errors.dup.freeze if @non_reloadable_errors.is_a?(Array)
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
    end

    def validate_fatal_error_handling!
      %i[reload_on_transaction_fatal_error reload_on_idempotent_fatal_error].each do |name|
        value = public_send(name)
        invalid!("#{name} must be true or false, got #{value.inspect}") unless [true, false].include?(value)
      end
      non_negative!(:wait_backoff_on_transaction_fatal_error, @wait_backoff_on_transaction_fatal_error)
      non_negative!(:wait_backoff_on_idempotent_fatal_error, @wait_backoff_on_idempotent_fatal_error)
      non_negative!(:wait_timeout_on_transaction_abort, @wait_timeout_on_transaction_abort)
      count!(:max_attempts_on_transaction_fatal_error, @max_attempts_on_transaction_fatal_error)
      count!(:max_attempts_on_idempotent_fatal_error, @max_attempts_on_idempotent_fatal_error)
      return if @non_reloadable_errors.is_a?(Array) && @non_reloadable_errors.all?(Symbol)

      invalid!("non_reloadable_errors must be an Array of error codes (Symbols), got #{@non_reloadable_errors.inspect}")
    end

    def validate_polling!
      invalid!("polling.mode must be one of #{Polling::MODES.inspect}, got #{@polling.mode.inspect}") unless Polling::MODES.include?(@polling.mode)
      invalid!("polling.poller is for :fd mode; :thread mode polls each producer in its own thread") if @polling.mode == :thread && @polling.poller
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

    def count!(name, value)
      invalid!("#{name} must be a positive Integer, got #{value.inspect}") unless value.is_a?(Integer) && value.positive?
    end

    def invalid!(message)
      raise Errors::ConfigurationInvalidError, message
    end
  end
end
