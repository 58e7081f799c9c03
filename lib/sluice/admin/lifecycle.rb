# frozen_string_literal: true

module Sluice
  class Admin
    # An admin's hooks in the client lifecycle (ClientHooks, ClientLife), and its
    # calls' way to the brokers (Transport), instrumented as `admin.request`.
    module Lifecycle
      include ClientHooks

      # Stops polling the client and releases it; calls waiting for a result
      # raise AdminClosedError. Idempotent; safe from any thread, fiber or
      # signal handler.
      # @return [nil]
      def close
        return @life.close_on_own_thread(@config.max_wait_timeout) { close } if Blocking.trap_context?

        @life.close_under_lock { @life.disconnect }
        nil
      end

      private

      def kind = :admin

      def native_class = Native::Admin

      def closed_error = Errors::AdminClosedError

      def polled_options = { notifier: ClientHooks::NO_WAITERS, results: @requests }

      def connected(client, state)
        super
        @transport = Transport.new(admin_id: @id, requests: @requests, state: state, poller: @poller,
                                   timeout_ms: @config.max_wait_timeout, client: method(:open_client))
      end

      def detach = @requests.close

      # Closed from the moment close began: a call made meanwhile would race the teardown.
      def open_client
        raise Errors::AdminClosedError, "admin #{@id} is closed" if @life.closing_or_closed?

        @client
      end

      # @param timeout_ms [Integer, nil] nil: max_wait_timeout (see Transport#request)
      # @return the result's payload
      def request(action, subject, timeout_ms = nil, &block)
        @monitor.instrument("admin.request", admin_id: @id, action: action, subject: subject) do
          code, message, payload = @transport.request(action, subject, timeout_ms, &block)
          fail!(action, subject, code, message) unless code.zero?
          payload
        end
      end

      def blocking(action, subject, &block)
        @monitor.instrument("admin.request", admin_id: @id, action: action, subject: subject) do
          @transport.blocking(action, subject, &block)
        end
      end

      # Raises the named error for a refused request (the first failed item of its result).
      def fail!(action, subject, code, message)
        error = KafkaError.new(code, message)
        raise ERRORS.fetch(error.code, Errors::AdminError).new([action, subject].compact.join(" "), error)
      end

      # Per-item results ([name, code, message, ...]): the first failure is raised.
      def check_items!(action, subject, items)
        items.each { |_, code, message| fail!(action, subject, code, message) unless code.zero? }
        items
      end
    end
  end
end
