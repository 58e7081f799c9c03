# frozen_string_literal: true

module Sluice
  class Admin
    # The two ways an admin call reaches the brokers: a request whose result
    # comes back through the poll, matched by number (#request, see
    # Requests), or a blocking read of the handle (#blocking). Both wait at
    # most the admin's max_wait_timeout, and both end early when the brokers
    # refuse the client's credentials or TLS.
    class Transport
      include Shared::Clock

      # @param client [#call] the native client for a call (raises once the admin is closed)
      def initialize(admin_id:, requests:, state:, poller:, timeout_ms:, client:)
        @admin_id = admin_id
        @requests = requests
        @state = state
        @poller = poller
        @timeout_ms = timeout_ms
        @client = client
      end

      # Sends one request (the block gets the client, the request's number and
      # the timeout) and waits for its result.
      # @param timeout_ms [Integer, nil] less than max_wait_timeout (what is left of a call that retries)
      # @return [Array(Integer, String, Object)] error code, message, payload
      def request(action, subject, timeout_ms = nil)
        timeout_ms ||= @timeout_ms
        id = @requests.open
        begin
          refused = native(action, subject) { yield(@client.call, id, timeout_ms) }
          refused || await(action, subject, id, timeout_ms)
        ensure
          @requests.forget(id)
        end
      end

      # A blocking read of the handle (GVL released; on a helper thread under
      # a fiber scheduler), whose result starts with librdkafka's error code:
      # a refusal of the client's credentials or TLS raises between two asks
      # (Shared::RefusableRead).
      def blocking(action, subject, &block)
        deadline = now + (@timeout_ms / 1000.0)
        Shared::RefusableRead.call(deadline, @state.method(:refusing_failure)) do |ms|
          native(action, subject) { @requests.reading { Shared::Blocking.call { block.call(@client.call, ms) } } }
        end
      end

      private

      # A native client closed by another thread meanwhile says so as an admin.
      def native(action, subject)
        yield
      rescue Errors::ProducerClosedError
        raise Errors::AdminClosedError, "admin #{@admin_id} was closed during #{action} #{subject}"
      end

      def await(action, subject, id, timeout_ms)
        result = @poller.in_poller_thread? ? pump_until(id, timeout_ms) : wait_for_result(id, timeout_ms)
        raise Errors::AdminClosedError, "admin #{@admin_id} was closed during #{action} #{subject}" if result == :closed

        result || [TIMED_OUT, "no result within max_wait_timeout (#{@timeout_ms} ms)", nil]
      end

      # Within max_wait_timeout, unless the brokers refuse the client's
      # credentials or TLS: a refusal reported meanwhile raises at once; one
      # reported before (librdkafka says so again only at its next reconnect,
      # up to 10 s later) raises once a result is RefusableRead::GRACE s late.
      def wait_for_result(id, timeout_ms)
        deadline = now + (timeout_ms / 1000.0)
        late = now + Shared::RefusableRead::GRACE
        refusals = @requests.refusals
        loop do
          slice = now < late ? late : deadline
          result = @requests.wait(id, ms_until([slice, deadline].min), refusals)
          return result unless result.nil? || result == :refused

          failure = @state.refusing_failure
          raise Errors::AuthenticationError, failure if failure && (result == :refused || now >= late)
          return nil if now >= deadline

          refusals = @requests.refusals
        end
      end

      # A call from a listener on the polling thread: nobody else would serve the queue.
      def pump_until(id, timeout_ms)
        deadline = now + (timeout_ms / 1000.0)
        until (result = @requests.result(id))
          return nil if now >= deadline

          @state.pump
        end
        result
      end
    end
  end
end
