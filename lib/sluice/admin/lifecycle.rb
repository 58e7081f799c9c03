# frozen_string_literal: true

module Sluice
  class Admin
    # An admin's hooks in the client lifecycle (Shared::ClientHooks, Shared::ClientLife), and its
    # calls' way to the brokers (Transport), instrumented as `admin.request`.
    module Lifecycle
      include Shared::ClientHooks

      # Stops polling the client and releases it, within timeout: calls of
      # other threads waiting for a result raise AdminClosedError at once; a
      # blocking read (metadata, watermarks, offsets for a time), which
      # librdkafka cannot wake, raises it when its current ask ends (at most
      # a second), and the client is released in the background once it has.
      # Idempotent; safe from any thread, fiber or signal handler.
      # @param timeout [Integer] ms the close may wait for the blocking reads of other threads
      # @return [nil]
      # @raise [ArgumentError] timeout is not a positive number of ms
      def close(timeout: @config.max_wait_timeout)
        raise ArgumentError, "close's timeout is a positive number of milliseconds, got #{timeout.inspect}" unless
          timeout.is_a?(Numeric) && timeout.positive?
        return @life.close_on_own_thread(timeout) { close(timeout: timeout) } if Shared::Blocking.trap_context?

        @life.begin_close(timeout)
        @life.close_under_lock { shut_down }
        nil
      end

      private

      def kind = :admin

      def native_class = Native::Admin

      def closed_error = Errors::AdminClosedError

      def polled_options = { notifier: Shared::ClientHooks::NO_WAITERS, results: @requests }

      def connected(client, state)
        super
        @transport = Transport.new(admin_id: @id, requests: @requests, state: state, poller: @poller,
                                   timeout_ms: @config.max_wait_timeout, client: method(:open_client))
      end

      def detach = @requests.close

      # The reads of other threads leave the handle before it is destroyed:
      # one still asking at the deadline gets the teardown on a thread of its
      # own, so the close keeps its timeout.
      def shut_down
        @requests.close # the waiting calls raise now, not after the reads
        return @life.disconnect if @requests.reads_done?(ms_until(@life.deadline) / 1000.0)

        teardown = Thread.new { @life.disconnect }
        teardown.name = "sluice.teardown##{@id}"
        teardown.report_on_exception = false
      end

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
