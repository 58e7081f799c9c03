# frozen_string_literal: true

module Sluice
  # An error reported by librdkafka or the broker, with a Symbol #code taken from
  # librdkafka's own error table (:msg_size_too_large, :msg_timed_out, ...).
  class KafkaError < Errors::BaseError
    # Message-level errors worth producing again: the broker or network was
    # briefly unavailable, or the local queue was full.
    RETRYABLE = %i[
      msg_timed_out timed_out queue_full transport all_brokers_down leader_not_available
      not_leader_for_partition request_timed_out network_exception not_enough_replicas
      not_enough_replicas_after_append unknown_topic_or_part not_coordinator coordinator_not_available
    ].freeze

    # The broker refused the client's credentials, or TLS failed.
    AUTHENTICATION = %i[authentication ssl].freeze

    # #code: the Symbol (:msg_timed_out); #number: librdkafka's
    # rd_kafka_resp_err_t; #description: the human-readable text.
    attr_reader :code, :number, :description

    # @param number [Integer] librdkafka's rd_kafka_resp_err_t
    # @param description [String, nil] nil: librdkafka's text for number
    # @param fatal [Boolean]
    # @param retryable [Boolean, nil] nil: whether the code is in RETRYABLE
    # @param abortable [Boolean] the transaction must be aborted
    def initialize(number, description = nil, fatal: false, retryable: nil, abortable: false)
      @number = number
      @code = self.class.code_for(number)
      @description = description || self.class.description_for(number)
      @fatal = fatal
      @retryable = retryable.nil? ? RETRYABLE.include?(@code) : retryable
      @abortable = abortable
      super("#{@description} (#{@code})")
    end

    # @return [Boolean] the client can do nothing more: a producer must be
    #   rebuilt (see Producer::Config#reload_on_transaction_fatal_error)
    def fatal? = @fatal
    # @return [Boolean] producing (or calling) again may succeed: librdkafka
    #   said so, or the code is in RETRYABLE
    def retryable? = @retryable
    # @return [Boolean] the broker refused the credentials, or TLS failed
    def authentication? = AUTHENTICATION.include?(@code)
    # The transaction must be aborted before the producer can go on.
    # @return [Boolean]
    def abortable? = @abortable

    class << self
      # @param number [Integer] librdkafka's rd_kafka_resp_err_t
      # @return [Symbol] its code (:unknown_<number> for one librdkafka does not know)
      def code_for(number)
        table.fetch(number) { [:"unknown_#{number}"] }.first
      end

      # @param code [Symbol] e.g. :queue_full
      # @return [Integer] librdkafka's rd_kafka_resp_err_t for it
      # @raise [ArgumentError] librdkafka has no such code
      def number_for(code)
        table.each { |number, (name, _)| return number if name == code }
        raise ArgumentError, "unknown librdkafka error code #{code.inspect}"
      end

      # @param number [Integer] librdkafka's rd_kafka_resp_err_t
      # @return [String] librdkafka's text for it
      def description_for(number)
        table.fetch(number) { [nil, "unknown error #{number}"] }.last
      end

      # Builds a KafkaError from the native [code, message, fatal, retriable, requires_abort] tuple.
      # @api private
      # @return [KafkaError]
      def from_tuple((number, message, fatal, retriable, requires_abort))
        new(number, message, fatal: fatal, retryable: retriable, abortable: requires_abort)
      end

      private

      # librdkafka's names: "_MSG_TIMED_OUT" -> :msg_timed_out, "MSG_SIZE_TOO_LARGE" -> :msg_size_too_large
      def table
        @table ||= Native.error_descriptions.to_h do |number, name, description|
          [number, [name.sub(/\A_/, "").downcase.to_sym, description]]
        end.freeze
      end
    end
  end
end
