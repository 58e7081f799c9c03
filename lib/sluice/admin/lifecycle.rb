# frozen_string_literal: true

module Sluice
  class Admin
    # The native admin client's life inside an Admin (connect, close), and the
    # two ways a call reaches the brokers: a request whose result comes back
    # through the poll (#request), or a blocking call of the handle (#blocking).
    module Lifecycle
      include ClientLifecycle

      def closed? = @closed

      # Stops polling the client and releases it; calls waiting for a result
      # raise AdminClosedError. Idempotent; safe from any thread, fiber or
      # signal handler.
      def close
        return close_on_own_thread(@config.max_wait_timeout) { close } if Blocking.trap_context?

        @lifecycle.synchronize do
          return if @closed

          @closed = true
          disconnect
          Shutdown.untrack(self)
        end
        @monitor.instrument("admin.closed", admin_id: @id)
        nil
      end

      # Answers an `oauthbearer.token_refresh` event (event[:bearer] is this admin).
      def oauthbearer_set_token(token:, lifetime_ms:, principal_name:, extensions: {})
        open_client
        error = @state.oauthbearer_set_token(token, lifetime_ms, principal_name, extensions.flat_map { |k, v| [k.to_s, v.to_s] })
        raise KafkaError.new(*error) if error
      end

      # Answers an `oauthbearer.token_refresh` event with a failure: librdkafka
      # reports it and asks again later.
      def oauthbearer_set_token_failure(reason)
        open_client
        @state.oauthbearer_set_token_failure(reason.to_s)
        nil
      end

      # @api private — Shutdown's at_exit hook.
      def close_at_exit = close

      private

      def connect
        client = Native::Admin.new(@config.kafka_pairs)
        state = Polling::PolledClient.new(kind: :admin, client_id: @id, client: client, monitor: @monitor, notifier: NO_WAITERS, results: @requests,
                                          logger: @config.logger, max_time: @config.polling.fd.max_time,
                                          periodic_poll_interval: @config.polling.fd.periodic_poll_interval, bearer: self)
        @client = client
        @state = state # before register: the first token refresh may be answered inside it
        @poller.register(state)
        @monitor.instrument("admin.connected", admin_id: @id)
      rescue Exception # rubocop:disable Lint/RescueException -- interrupted too: nothing native may leak
        @poller.unregister(state) if state
        client&.destroy
        raise
      end

      def disconnect
        Thread.handle_interrupt(Object => :never) do
          @requests.close
          @poller.unregister(@state)
          Blocking.call(interruptible: false) { @client.destroy }
        end
      end

      def open_client
        raise Errors::AdminClosedError, "admin #{@id} is closed" if @closed

        @client
      end

      # Sends one request (the block gets the client, the request's number and
      # the timeout) and waits for its result, within max_wait_timeout.
      # @return the result's payload
      def request(action, subject)
        @monitor.instrument("admin.request", admin_id: @id, action: action, subject: subject) do
          id = @requests.open
          begin
            refused = native(action, subject) { yield(open_client, id, @config.max_wait_timeout) }
            fail!(action, subject, *refused) if refused
            code, message, payload = await(action, subject, id)
            fail!(action, subject, code, message) unless code.zero?
            payload
          ensure
            @requests.forget(id)
          end
        end
      end

      # A blocking read of the handle (GVL released; on a helper thread under
      # a fiber scheduler), whose result starts with librdkafka's error code:
      # a refusal of the client's credentials or TLS raises between two asks
      # (RefusableRead).
      def blocking(action, subject, &block)
        @monitor.instrument("admin.request", admin_id: @id, action: action, subject: subject) do
          deadline = now + (@config.max_wait_timeout / 1000.0)
          RefusableRead.call(deadline, @state.method(:refusing_failure)) do |ms|
            native(action, subject) { Blocking.call { block.call(open_client, ms) } }
          end
        end
      end

      # A native client closed by another thread meanwhile says so as an admin.
      def native(action, subject)
        yield
      rescue Errors::ProducerClosedError
        raise Errors::AdminClosedError, "admin #{@id} was closed during #{action} #{subject}"
      end

      def await(action, subject, id)
        result = @poller.in_poller_thread? ? pump_until(id) : wait_for_result(id)
        raise Errors::AdminClosedError, "admin #{@id} was closed during #{action} #{subject}" if result == :closed

        result || [TIMED_OUT, "no result within max_wait_timeout (#{@config.max_wait_timeout} ms)", nil]
      end

      # Within max_wait_timeout, unless the brokers refuse the client's
      # credentials or TLS: a refusal reported meanwhile raises at once; one
      # reported before (librdkafka says so again only at its next reconnect,
      # up to 10 s later) raises once a result is RefusableRead::GRACE s late.
      def wait_for_result(id)
        deadline = now + (@config.max_wait_timeout / 1000.0)
        late = now + RefusableRead::GRACE
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
      def pump_until(id)
        deadline = now + (@config.max_wait_timeout / 1000.0)
        until (result = @requests.result(id))
          return nil if now >= deadline

          @state.pump
        end
        result
      end

      # Raises the named error for a refused request (the first failed item of its result).
      def fail!(action, subject, code, message)
        error = KafkaError.new(code, message)
        raise ERRORS.fetch(error.code, Errors::AdminError).new("#{action} #{subject}", error)
      end

      # Per-item results ([name, code, message, ...]): the first failure is raised.
      def check_items!(action, subject, items)
        items.each { |_, code, message| fail!(action, subject, code, message) unless code.zero? }
        items
      end
    end
  end
end
