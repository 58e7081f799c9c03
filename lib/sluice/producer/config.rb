# frozen_string_literal: true

require "logger"
require "securerandom"

module Sluice
  class Producer
    # Settings of one producer, filled in the block given to Producer.new and
    # frozen once it is valid. (Sluice::Consumer::Config is the consumer's.)
    class Config < Shared::ClientConfig
      # Default wait (ms) of produce_sync and Delivery::Handle#wait, and how long
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
      # producer was replaced by another one with its transactional.id), but
      # for a fence of a transaction older than transaction.timeout.ms: the
      # broker's coordinator aborted it and bumped the epoch (an outage or a
      # broker restart), and nobody else holds the id. A transactional
      # producer reloads by default (true, as WaterDrop), so it works again
      # after such an outage with no code of the application's; an idempotent
      # one does not (false).
      attr_accessor :reload_on_transaction_fatal_error, :wait_backoff_on_transaction_fatal_error,
                    :max_attempts_on_transaction_fatal_error,
                    :reload_on_idempotent_fatal_error, :wait_backoff_on_idempotent_fatal_error,
                    :max_attempts_on_idempotent_fatal_error, :non_reloadable_errors
      # Before aborting a transaction, wait up to this long (ms) for its first
      # delivery report: an abort while librdkafka still registers the first
      # partition with the coordinator can fail fatally with invalid_txn_state
      # (librdkafka issue 4849; with 2.0.2, 22-25 of 100 aborts right after a
      # produce). Default 5,000: the wait costs one delivery's round trip, and
      # only when the transaction has no acknowledged delivery yet. 0 aborts at once.
      attr_accessor :wait_timeout_on_transaction_abort
      # The client the producer drives: Native::Producer (librdkafka), or an
      # in-memory one for tests, Clients::Buffered or Clients::Dummy, as
      # WaterDrop's client_class. Built with the librdkafka properties.
      attr_accessor :client_class

      def initialize
        super
        @max_wait_timeout = 5_000
        @wait_on_queue_full = true
        @wait_backoff_on_queue_full = 100
        @wait_timeout_on_queue_full = 10_000
        @reload_on_transaction_fatal_error = true
        @wait_backoff_on_transaction_fatal_error = 1_000
        @max_attempts_on_transaction_fatal_error = 10
        @reload_on_idempotent_fatal_error = false
        @wait_backoff_on_idempotent_fatal_error = 5_000
        @max_attempts_on_idempotent_fatal_error = 5
        @non_reloadable_errors = %i[fenced]
        @wait_timeout_on_transaction_abort = 5_000
        @client_class = Native::Producer
      end

      # Checks every setting (Producer.new calls it before freezing the config).
      # @return [self]
      # @raise [Errors::ConfigurationInvalidError] naming the first bad setting
      def validate!
        super
        positive!(:max_wait_timeout, @max_wait_timeout)
        positive!(:wait_backoff_on_queue_full, @wait_backoff_on_queue_full)
        positive!(:wait_timeout_on_queue_full, @wait_timeout_on_queue_full)
        validate_fatal_error_handling!
        validate_client_class!
        self
      end

      # Freezes non_reloadable_errors too, and notes whether the producer is
      # transactional (asked on every produce).
      # @return [self]
      def freeze
        @non_reloadable_errors = @non_reloadable_errors.dup.freeze if @non_reloadable_errors.is_a?(Array)
        @transactional = !kafka_value("transactional.id").nil? # asked on every produce
        super
      end

      # Has a transactional.id (known once frozen); an empty one is none, as for librdkafka.
      def transactional? = @transactional

      # @return [Boolean] enable.idempotence is on (a transactional producer always is)
      def idempotent? = transactional? || kafka_value("enable.idempotence")

      private

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

      def validate_client_class!
        return if @client_class.is_a?(Class) && %i[produce produce_many drain destroy].all? { |name| @client_class.method_defined?(name) }

        invalid!("client_class must be a producer client class (Sluice::Native::Producer, Sluice::Clients::Buffered, " \
                 "Sluice::Clients::Dummy), got #{@client_class.inspect}")
      end

      def count!(name, value)
        invalid!("#{name} must be a positive Integer, got #{value.inspect}") unless value.is_a?(Integer) && value.positive?
      end
    end
  end
end

module Sluice
  # The producer's settings class before Producer::Config: kept for code that names it.
  Config = Producer::Config

  # In-memory producer clients for tests (Producer::Config#client_class),
  # loaded when first named.
  module Clients
    autoload :Dummy, File.expand_path("../clients/dummy", __dir__)
    autoload :Buffered, File.expand_path("../clients/buffered", __dir__)
  end
end
