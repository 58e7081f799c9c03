# frozen_string_literal: true

module Sluice
  # Every error sluice raises is a Sluice::Errors::BaseError.
  module Errors
    # What became of the transaction an error escaped from (Producer#transaction
    # sets it on every error it raises, the block's own ones included):
    # - :aborted: it did not commit and never will (no commit was sent, or the
    #   coordinator refused it); producing the same work again duplicates nothing;
    # - :unknown: a commit was sent and its answer not learned (it timed out, the
    #   producer was closed while it committed, the connection broke): it may have
    #   committed, and the next transaction or close may still finish it. Check
    #   the output (read_committed) before producing the same work again.
    # nil on errors that did not come out of a transaction.
    module TransactionOutcome
      # @return [Symbol, nil] :aborted, :unknown, or nil outside a transaction (set by Producer#transaction)
      attr_accessor :transaction_outcome

      # @return [Boolean] the transaction did not commit, and never will
      def transaction_aborted? = @transaction_outcome == :aborted

      # @return [Boolean] the transaction may have committed
      def transaction_outcome_unknown? = @transaction_outcome == :unknown
    end

    # The ancestor of every sluice error: `rescue Sluice::Errors::BaseError` catches them all.
    class BaseError < StandardError
      include TransactionOutcome
    end

    # Producer.new was given a setting sluice or librdkafka does not accept.
    ConfigurationInvalidError = Class.new(BaseError)

    # A setting that would send a secret in clear: an OAuth token endpoint
    # over http:// to a host other than loopback (the client secret is in its request).
    InsecureEndpointError = Class.new(ConfigurationInvalidError)

    # A message was refused before it reached librdkafka (nothing was sent).
    MessageInvalidError = Class.new(BaseError)

    # A producer or consumer is closed (or closing).
    ClientClosedError = Class.new(BaseError)

    # The producer is closed (or closing) and takes no more messages.
    ProducerClosedError = Class.new(ClientClosedError)

    # The consumer is closed (or closing).
    ConsumerClosedError = Class.new(ClientClosedError)

    # A close from another thread met a reader whose own block outlived its
    # timeout: the consumer is still open, and closes when the reader returns.
    ConsumerCloseTimeoutError = Class.new(BaseError)

    # The producer or consumer was created in another process: a forked child
    # must create its own. (A ProducerClosedError, as it always was.)
    ForkedProcessError = Class.new(ProducerClosedError)

    # A consumer call about a partition the consumer is not assigned
    # (pause, resume, seek), or one that needs a subscription first.
    ConsumerStateError = Class.new(BaseError)

    # Consumer#store_offset, or Consumer#commit with offsets, inside a block of
    # each_message(concurrency:) would store an offset past a message of its
    # partition whose block has not finished: a crash then would skip that
    # message. Return from the block instead (each_message stores its offset
    # once every lower one finished), or commit without offsets.
    OffsetPastUnfinishedError = Class.new(BaseError)

    # A call librdkafka or the broker refused; #kafka_error (a KafkaError)
    # tells why, and its #code, #fatal? and #retryable? are asked here too.
    class KafkaCallError < BaseError
      # @return [KafkaError] librdkafka's or the broker's reason
      attr_reader :kafka_error

      # @param action [String] what was refused ("commit", "seek", ...), the start of #message
      # @param kafka_error [KafkaError]
      def initialize(action, kafka_error)
        super("#{action} failed: #{kafka_error.message}")
        @kafka_error = kafka_error
      end

      # @return [Symbol] the KafkaError's code, e.g. :unknown_topic_or_part
      def code = kafka_error.code
      # @return [Boolean] the client can do nothing more (see KafkaError#fatal?)
      def fatal? = kafka_error.fatal?
      # @return [Boolean] the same call may succeed if made again
      def retryable? = kafka_error.retryable?
    end

    # A consumer call the broker or librdkafka refused (commit, seek, ...).
    ConsumerError = Class.new(KafkaCallError)

    # A consumer with "group.protocol": "consumer" (KIP-848) whose group
    # coordinator does not speak that protocol (Apache Kafka before 4.0, or
    # the protocol turned off): raised by its reads, within seconds, instead
    # of waiting for an assignment that never comes. Use the classic protocol
    # with that cluster, or upgrade it. Not fatal: once the coordinator has
    # the protocol (a rolling upgrade), reading again joins the group.
    class GroupProtocolUnsupportedError < ConsumerError
      # @param kafka_error [KafkaError] librdkafka's report (:unsupported_feature), naming the broker
      def initialize(kafka_error)
        super("joining the group with group.protocol=consumer (KIP-848; or set group.protocol=classic)", kafka_error)
      end
    end

    # A ShareConsumer on a librdkafka without the share consumer (before
    # 2.15.0: the system's, or a build of another version).
    ShareConsumerUnavailableError = Class.new(BaseError)

    # A ShareConsumer given a setting only a consumer-group member has
    # (enable.auto.commit, auto.offset.reset, partition.assignment.strategy,
    # ...): the message names each one and where a share group keeps it.
    ShareConsumerConfigError = Class.new(ConfigurationInvalidError)

    # The brokers have no share groups (Kafka 3.x, or 4.x with them off):
    # raised by the share consumer's reads once librdkafka learns it from the
    # coordinator (within a second of the first poll), instead of waiting for
    # records that never come.
    ShareGroupsUnsupportedError = Class.new(ConsumerError)

    # A ShareConsumer in explicit acknowledgement mode polled while records of
    # its last batch were neither accepted, released nor rejected (#records
    # lists them). Acknowledge each, then poll again.
    class UnacknowledgedRecordsError < ConsumerStateError
      # @return [Array<ShareConsumer::Record>] the records left unacknowledged
      attr_reader :records

      # @param records [Array<ShareConsumer::Record>]
      def initialize(records)
        shown = records.first(5).map { |record| "#{record.topic}/#{record.partition}@#{record.offset}" }.join(", ")
        super("#{records.size} record(s) of the last batch not acknowledged (#{shown}#{", ..." if records.size > 5}): " \
              "accept, release or reject each before the next poll")
        @records = records
      end
    end

    # The admin client is closed.
    AdminClosedError = Class.new(ClientClosedError)

    # An admin call the broker or librdkafka refused (#kafka_error tells why).
    AdminError = Class.new(KafkaCallError)
    # create_topic: the topic exists.
    TopicAlreadyExistsError = Class.new(AdminError)
    # The topic does not exist.
    UnknownTopicError = Class.new(AdminError)
    # The consumer group does not exist.
    UnknownGroupError = Class.new(AdminError)
    # reset_offsets of a group id that is a share group's (KIP-932), or another kind of group
    # that commits no offsets: the broker refused the commit as for no group, where for an id
    # of no group at all it would have made one. A share group's start offsets move with Kafka's
    # kafka-share-groups.sh (AlterShareGroupOffsets, which librdkafka does not have).
    NotConsumerGroupError = Class.new(UnknownGroupError)
    # reset_offsets or delete_group while the group has members.
    GroupNotEmptyError = Class.new(AdminError)
    # No answer within the admin client's max_wait_timeout.
    AdminTimeoutError = Class.new(AdminError)
    # The broker refused the arguments (partition count, replication factor, settings, topic name).
    InvalidAdminRequestError = Class.new(AdminError)

    # A metrics listener's registry holds one of its metric names already, and
    # not from a sluice listener: sharing it would mix other numbers into it
    # (the message names the metric, and the namespace: that avoids it).
    MetricNameTakenError = Class.new(BaseError)

    # transaction_mark_as_consumed outside a transaction block.
    TransactionRequiredError = Class.new(BaseError)

    # A wait ran out of time; the handle stays pending and can be waited on again.
    class WaitTimeoutError < BaseError
      # @return [Delivery::Handle, nil] the handle waited on; wait on it again for a late report
      attr_reader :handle

      # @param message [String]
      # @param handle [Delivery::Handle, nil]
      def initialize(message = "timed out waiting for the delivery report", handle: nil)
        super(message)
        @handle = handle
      end
    end

    # A message could not be delivered. #kafka_error tells why (#code, #fatal?, #retryable?).
    class ProduceError < BaseError
      # #kafka_error: why (a KafkaError); #delivery_report: the failed message's
      # report (a DeliveryReport; nil when the message never reached librdkafka).
      attr_reader :kafka_error, :delivery_report

      # @param kafka_error [KafkaError]
      # @param delivery_report [Delivery::Report, nil]
      def initialize(kafka_error, delivery_report: nil)
        super("delivery failed: #{kafka_error.message}")
        @kafka_error = kafka_error
        @delivery_report = delivery_report
      end

      # @return [Symbol] the KafkaError's code, e.g. :unknown_topic_or_part
      def code = kafka_error.code
      # @return [Boolean] the client can do nothing more (see KafkaError#fatal?)
      def fatal? = kafka_error.fatal?
      # @return [Boolean] the same call may succeed if made again
      def retryable? = kafka_error.retryable?
    end

    # The broker refused the client's credentials (SASL: #code :authentication)
    # or TLS failed (#code :ssl: wrong CA), and no broker is usable: raised by
    # produce_sync, Delivery::Handle#wait, flush and Consumer#poll, each_message
    # and each_batch within about a second, not after message.timeout.ms.
    # #kafka_error has librdkafka's reason. The client stays usable: once the
    # broker accepts it (rotated credentials), it delivers and reads again.
    class AuthenticationError < KafkaCallError
      # the failed message's report, for a producer's handle
      attr_reader :delivery_report

      # @param kafka_error [KafkaError]
      # @param delivery_report [Delivery::Report, nil]
      def initialize(kafka_error, delivery_report: nil)
        super("authentication", kafka_error)
        @delivery_report = delivery_report
      end
    end

    # produce_many_* failed part-way: #dispatched holds the handles of the
    # messages enqueued before the failure (they are on their way; producing
    # them again would duplicate them). #kafka_error is the failure itself.
    class ProduceManyError < ProduceError
      # @return [Array<Delivery::Handle>] handles of the messages enqueued before the failure
      attr_reader :dispatched

      # @param kafka_error [KafkaError]
      # @param dispatched [Array<Delivery::Handle>]
      def initialize(kafka_error, dispatched:)
        super(kafka_error)
        @dispatched = dispatched
      end

      # @return [String] the failure, and how many messages were enqueued before it
      def message = "#{super} (after #{@dispatched.size} message(s) of the batch were enqueued: see #dispatched)"
    end

    # A transaction could not be begun, committed or aborted.
    class TransactionError < KafkaCallError
      # @return [Boolean] the transaction must be aborted before the producer can go on (a transaction block that raises aborts it)
      def abortable? = kafka_error.abortable?
    end

    # Raise inside Producer#transaction to abort it quietly.
    AbortTransaction = Class.new(BaseError)

    # Producer#close was called inside the producer's own transaction block:
    # the transaction would be left open. Finish the block first.
    ProducerTransactionalCloseAttemptError = Class.new(BaseError)

    # A transaction block was left by break, return or throw (Timeout.timeout
    # without an exception class throws too): whether to commit is ambiguous,
    # so the transaction was aborted.
    EarlyTransactionExitNotAllowedError = Class.new(BaseError)
  end

  # The same class as Errors::AbortTransaction, shorter to raise.
  # @example
  #   producer.transaction do
  #     producer.produce_async(topic: "events", payload: "draft")
  #     raise Sluice::AbortTransaction # aborted quietly: transaction returns nil
  #   end
  AbortTransaction = Errors::AbortTransaction
end
