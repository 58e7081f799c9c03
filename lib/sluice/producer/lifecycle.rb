# frozen_string_literal: true

module Sluice
  class Producer
    # The native client's life inside a Producer: connect, close (from any
    # thread, fiber, callback, signal handler or at exit), and reload after a
    # fatal error. One client at a time: a reload destroys the old one before
    # it builds the new one.
    module Lifecycle
      include ClientLifecycle

      def closed? = @closed

      # :initial (no client yet), :connected, :closing (close under way) or :closed.
      def status
        return :closed if @closed
        return :closing if @closing

        @client ? :connected : :initial
      end

      # Sends what is buffered, waits for the outstanding delivery reports, stops polling and
      # releases the native handle. Idempotent; safe from any thread, fiber, a
      # callback on the polling thread, a signal handler (Signal.trap) and
      # at_exit. An open transaction of another thread or fiber is waited for
      # (within the timeout), then aborted.
      # @param timeout [Integer, nil] ms to wait for deliveries (and an open
      #   transaction); what is still queued after it is purged: those handles
      #   resolve with a purge error and `message.purged` reports each. nil
      #   waits for every report.
      # @raise [Errors::ProducerTransactionalCloseAttemptError] inside this
      #   producer's own transaction block
      def close(timeout: @config.max_wait_timeout)
        return if @closed
        return close_from_trap(timeout) if Blocking.trap_context?

        if own_transaction?
          raise Errors::ProducerTransactionalCloseAttemptError,
                "producer #{@id}: close inside its own transaction block would leave the transaction open; finish the block first"
        end

        close_now(timeout)
      end

      # Closes without waiting for deliveries: what is still queued or in flight
      # is purged (those handles resolve with a purge error).
      def close! = close(timeout: 0)

      # @api private — Shutdown's at_exit hook. Closes with the usual bound and
      # says so loudly when messages had to be dropped.
      def close_at_exit
        close
        return if @dropped.zero?

        message = "producer #{@id} was still open at exit; closing it dropped #{@dropped} message(s) " \
                  "not delivered within max_wait_timeout (#{@config.max_wait_timeout} ms)"
        @config.logger.error(message)
        @monitor.instrument("error.occurred", producer_id: @id, type: "producer.close_at_exit",
                                              error: Errors::ProduceError.new(KafkaError.new(PURGED, message)))
      end

      private

      def init_lifecycle
        @closing = false
        @dropped = 0
      end

      # Builds the native client and registers it with the poller.
      def connect
        client = Native::Producer.new(@config.kafka_pairs)
        client.handles(DeliveryHandle, @notifier)
        state = Polling::PolledClient.new(kind: :producer, client_id: @id, client: client, monitor: @monitor, notifier: @notifier,
                                          logger: @config.logger, max_time: @config.polling.fd.max_time,
                                          periodic_poll_interval: @config.polling.fd.periodic_poll_interval, bearer: self)
        @token_state = state # before register: the first token refresh may be answered inside it
        @notifier.attach(@poller, state)
        @poller.register(state)
        @topic_configs.register(client) { @client = client }
        @state = state
        @partitioner = Partitioner.new(client, @config.max_wait_timeout, state.method(:refusing_failure))
        @monitor.instrument("producer.connected", producer_id: @id)
      rescue Exception # rubocop:disable Lint/RescueException -- interrupted too: nothing native may leak
        @poller.unregister(state) if state
        client&.destroy
        raise
      end

      # Stops polling the client and destroys it; handles that never got a
      # report resolve with `error` (a purge, or the fatal error of a reload).
      # Runs to the end whatever interrupt arrives meanwhile.
      def disconnect(error = nil)
        state = @state
        client = @client
        Thread.handle_interrupt(Object => :never) do
          @poller.unregister(state)
          Blocking.call(interruptible: false) { client.destroy }
          orphans = client.take_inflight
          orphans.each { |handle| state.orphaned(handle, error) }
          @notifier.notify
          orphans.size
        end
      end

      def close_now(timeout, interrupted: nil)
        return if @lifecycle.owned? # a callback of our own close: the outer call finishes
        # On the polling thread, never wait for a close running elsewhere: it waits
        # for this very thread, and finishes as soon as the callback returns.
        return if @lifecycle.locked? && @poller.in_poller_thread?

        @lifecycle.synchronize do
          return if @closed

          @closing = true
          @monitor.instrument("producer.closing", producer_id: @id)
          @client.forked? ? (@closed = true) : shut_down(timeout, interrupted)
          Shutdown.untrack(self)
        end
        @monitor.instrument("producer.closed", producer_id: @id)
        nil
      end

      # See ClientLifecycle#close_on_own_thread. The transaction the signal
      # interrupted (if any) is the interrupted thread's: close may abort it.
      def close_from_trap(timeout)
        return if @lifecycle.owned? # the code the signal interrupted was closing us: it finishes after the handler

        interrupted = Thread.current
        close_on_own_thread(timeout || @config.max_wait_timeout) { close_now(timeout, interrupted: interrupted) }
      end

      def shut_down(timeout, interrupted)
        deadline = timeout && now + (timeout / 1000.0)
        settle_transaction(deadline, interrupted)
        unsent = flush_buffer_at_close
        purged_before = @state.purged
        unless wait_for_deliveries(deadline && [((deadline - now) * 1000).ceil, 0].max)
          @client.purge
          wait_for_deliveries(@config.max_wait_timeout)
        end
        orphans = disconnect
        @dropped = @state.purged - purged_before + orphans + unsent
        @closed = true
      end

      # rd_kafka_flush only waits (the poller serves the queue meanwhile); on the
      # poller's own thread, or when its thread is gone (process teardown),
      # nobody else would serve it, so we do.
      def wait_for_deliveries(timeout_ms)
        return pump_until_delivered(timeout_ms) if @poller.in_poller_thread? || !@poller.alive?

        started = now
        return false unless Blocking.call { @client.flush(timeout_ms || -1) }

        left = timeout_ms && [timeout_ms - ((now - started) * 1000), 0].max
        @notifier.wait_until(left) { @state.settled? }
      end

      def pump_until_delivered(timeout_ms)
        deadline = timeout_ms && now + (timeout_ms / 1000.0)
        until @client.outq_len.zero?
          return false if deadline && now >= deadline

          @state.pump
        end
        true
      end

      # A produce met a destroyed client: was it replaced by a reload (then the
      # caller tries again with the new one) or is the producer really closed?
      def client_replaced?(client, error)
        return false if @closing || error.is_a?(Errors::ForkedProcessError)

        @lifecycle.synchronize {} unless @lifecycle.owned? || @poller.in_poller_thread? # a reload under way
        !client.equal?(@client)
      end

      # An idempotent (not transactional) producer met a fatal error: rebuild
      # the client and let the caller try again, when configured and within the
      # attempts of that call.
      def reload_after_idempotent_fatal?(error, attempt)
        return false unless error.fatal? && idempotent? && !transactional? && @config.reload_on_idempotent_fatal_error
        return false if @config.non_reloadable_errors.include?(error.code)
        return false if attempt > @config.max_attempts_on_idempotent_fatal_error

        reload!(error.kafka_error, attempt)
        sleep(@config.wait_backoff_on_idempotent_fatal_error / 1000.0)
        true
      end

      # Destroys the client, fatally broken, then builds a new one; its pending
      # handles resolve with the fatal error. A no-op when the current client
      # is sound (another thread reloaded it already) or the producer closes.
      # `producer.reload` comes first: its listeners may change the librdkafka
      # settings the new client gets (event[:kafka], a copy), as WaterDrop's
      # listeners change the config (a new transactional.id, say).
      def reload!(error, attempt)
        return if @lifecycle.owned? # inside close (its final flush's transaction): no new client now

        @lifecycle.synchronize do
          return if @closing || !@client.fatal_error

          previous = reconfigure(error, attempt)
          disconnect(error)
          @transactions_ready = false
          begin
            connect
          rescue Errors::ConfigurationInvalidError => e
            raise unless previous # librdkafka refused what a producer.reload listener set: back to what worked

            @monitor.instrument("error.occurred", producer_id: @id, type: "producer.reload", error: e)
            @config = previous
            previous = nil
            retry
          rescue StandardError
            @closing = @closed = true # no client left: the producer cannot go on
            Shutdown.untrack(self)
            raise
          end
        end
        @monitor.instrument("producer.reloaded", producer_id: @id, error: error, attempt: attempt)
      end

      # Settings a listener made invalid are reported and left out: the new
      # client gets the producer's settings as they were.
      # @return [Config, nil] the settings replaced, if any
      def reconfigure(error, attempt)
        kafka = @config.kafka.dup
        @monitor.instrument("producer.reload", producer_id: @id, error: error, attempt: attempt, caller: self, kafka: kafka)
        return if kafka == @config.kafka

        previous = @config
        @config = @config.with_kafka(kafka)
        previous
      rescue Errors::ConfigurationInvalidError => e
        @monitor.instrument("error.occurred", producer_id: @id, type: "producer.reload", error: e)
        nil
      end
    end
  end
end
