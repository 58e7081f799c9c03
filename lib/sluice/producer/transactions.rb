# frozen_string_literal: true

require "English"

module Sluice
  class Producer
    # Producer#transaction for producers with "transactional.id".
    module Transactions
      COMMIT_ATTEMPTS = 3
      # librdkafka's own choice: the remaining transaction timeout (or twice
      # transaction.timeout.ms for init); shorter values risk desynchronising
      # the transaction state when a request fails.
      DEFAULT_TIMEOUT = -1

      # Runs the block in a transaction: commits when it returns (also through
      # return/break), aborts and re-raises when it raises, aborts quietly on
      # Sluice::AbortTransaction. A nested call joins the outer transaction.
      # @return the block's value (nil when aborted)
      def transaction(&block)
        return yield if @transaction_mutex.owned?

        @transaction_mutex.synchronize do
          ensure_open!
          prepare_transactions
          transactional(:begin_transaction)
          run_transaction(&block)
        end
      end

      def transactional? = !@config.kafka_setting("transactional.id").nil?

      # Inside a transaction block (of this thread)?
      def transaction? = @transaction_mutex.owned?

      private

      def run_transaction
        outcome = :commit
        yield
      rescue AbortTransaction
        outcome = :abort
        nil
      rescue Exception # rubocop:disable Lint/RescueException -- abort on anything, then re-raise
        outcome = :abort
        raise
      ensure
        outcome == :commit ? commit_transaction : abort_transaction(raise_errors: $ERROR_INFO.nil?)
      end

      def prepare_transactions
        unless transactional?
          raise Errors::TransactionError.new("transaction",
                                             KafkaError.new(KafkaError.number_for(:not_configured),
                                                            "producer has no transactional.id"))
        end
        return if @transactions_ready

        transactional(:init_transactions, DEFAULT_TIMEOUT)
        @transactions_ready = true
      end

      def commit_transaction
        attempts = 0
        begin
          transactional(:commit_transaction, DEFAULT_TIMEOUT)
        rescue Errors::TransactionError => e
          if e.abortable?
            abort_transaction(raise_errors: false)
          elsif e.retryable? && (attempts += 1) < COMMIT_ATTEMPTS
            retry
          end
          raise
        end
      end

      def abort_transaction(raise_errors:)
        transactional(:abort_transaction, DEFAULT_TIMEOUT)
      rescue Errors::BaseError => e
        raise if raise_errors

        @monitor.instrument("error.occurred", producer_id: @id, type: "transaction.abort", error: e)
      end

      def transactional(action, *args)
        tuple = @client.public_send(action, *args)
        raise Errors::TransactionError.new(action.to_s.tr("_", " "), KafkaError.from_tuple(tuple)) if tuple
      end
    end
  end
end
