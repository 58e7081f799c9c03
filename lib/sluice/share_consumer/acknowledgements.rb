# frozen_string_literal: true

module Sluice
  class ShareConsumer
    # The records of the last batch not yet accepted, released or rejected,
    # and the acknowledging of them. librdkafka runs in explicit mode whatever
    # the consumer's: its implicit mode can only accept, and a block that
    # raised releases what it left (Config#acknowledgement says the rest).
    class Acknowledgements
      # rd_kafka_share_AcknowledgeType_t
      TYPES = { accept: 1, release: 2, reject: 3 }.freeze

      def initialize(native)
        @native = native
        @pending = {}
      end

      # @return [Array<Record>] the records still waiting for an acknowledgement
      def pending = @pending.values

      def empty? = @pending.empty?

      # @return [Boolean] the record still waits for its acknowledgement (by position: a lookup, not a scan)
      def pending?(record) = @pending.key?(record.position)

      # A new batch's records: each waits for its acknowledgement (one librdkafka
      # handled itself, a record-level error, does not).
      def track(records)
        records.each { |record| @pending[record.position] = record unless record.error_tuple }
      end

      # @param type [Symbol] :accept, :release or :reject
      # @raise [Errors::ConsumerStateError] the record is not one of the last batch's unacknowledged ones
      def acknowledge(record, type)
        code = TYPES.fetch(type) { raise ArgumentError, "acknowledgement type must be one of #{TYPES.keys.inspect}, got #{type.inspect}" }
        unless @pending.delete(record.position)
          raise Errors::ConsumerStateError, "#{record.topic}/#{record.partition}@#{record.offset} is not a record of the last batch " \
                                            "waiting for an acknowledgement (acknowledged already, or not this consumer's)"
        end
        error = @native.acknowledge(record.topic, record.partition, record.offset, code)
        raise Errors::ConsumerError.new("acknowledge", KafkaError.from_tuple(error)) if error
      end

      # Every record still waiting, with the same type.
      def acknowledge_all(type) = pending.each { |record| acknowledge(record, type) }
    end
  end
end
