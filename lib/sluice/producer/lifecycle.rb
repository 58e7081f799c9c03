# frozen_string_literal: true

module Sluice
  class Producer
    # A producer's hooks in the client lifecycle (ClientHooks, ClientLife), its close
    # (from any thread, fiber, callback, signal handler or at exit), and
    # reload after a fatal error. One client at a time: a reload destroys the
    # old one before it builds the new one.
    module Lifecycle
      include ClientHooks

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
      # @return [nil]
      def close(timeout: @config.max_wait_timeout)
        return if closed?
        return close_from_trap(timeout) if Blocking.trap_context?

        if @transactions.own?
          raise Errors::ProducerTransactionalCloseAttemptError,
                "producer #{@id}: close inside its own transaction block would leave the transaction open; finish the block first"
        end

        close_now(timeout)
      end

      # Closes without waiting for deliveries: what is still queued or in flight
      # is purged (those handles resolve with a purge error).
      # @return [nil]
      def close! = close(timeout: 0)

      # Shutdown's at_exit hook. Closes with the usual bound and says so loudly
      # when messages had to be dropped.
      # @api private
      # @return [void]
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
        @dropped = 0
      end

      def kind = :producer

      def native_class = @config.client_class

      def closed_error = Errors::ProducerClosedError

      def polled_options = { notifier: @notifier }

      def attach(client, state)
        client.handles(DeliveryHandle, @notifier)
        @notifier.attach(@poller, state)
      end

      def connected(client, state)
        @topic_configs.register(client) { @client = client }
        @state = state
        @partitioner = Partitioner.new(client, @config.max_wait_timeout, state.method(:refusing_failure))
      end

      # Handles that never got a report resolve with `error` (a purge, or the
      # fatal error of a reload).
      # @return [Integer] how many
      def disconnect(error = nil)
        state = @state
        client = @client
        @life.disconnect(state, client) do
          orphans = client.take_inflight
          orphans.each { |handle| state.orphaned(handle, error) }
          @notifier.notify
          orphans.size
        end
      end

      def close_now(timeout, interrupted: nil)
        return if @life.held_by_current? # a callback of our own close: the outer call finishes
        # On the polling thread, never wait for a close running elsewhere: it waits
        # for this very thread, and finishes as soon as the callback returns.
        return if @life.busy_on_poller?

        @life.begin_close(timeout) # before the lock: a transaction of another thread bounds its waits by it
        @life.close_under_lock { shut_down(interrupted) unless @client.forked? }
        nil
      end

      # See ClientLife#close_on_own_thread. The transaction the signal
      # interrupted (if any) is the interrupted thread's: close may abort it.
      def close_from_trap(timeout)
        return if @life.held_by_current? # the code the signal interrupted was closing us: it finishes after the handler

        interrupted = Thread.current
        @life.close_on_own_thread(timeout || @config.max_wait_timeout) { close_now(timeout, interrupted: interrupted) }
      end

      def shut_down(interrupted)
        deadline = @life.deadline
        @transactions.settle(deadline, interrupted)
        unsent = @buffering.flush_at_close
        purged_before = @state.purged
        unless wait_for_deliveries(deadline && [((deadline - now) * 1000).ceil, 0].max)
          @client.purge
          wait_for_deliveries(@config.max_wait_timeout)
        end
        orphans = disconnect
        @dropped = @state.purged - purged_before + orphans + unsent
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
        return false if @life.closing_or_closed? || error.is_a?(Errors::ForkedProcessError)

        @life.wait_for_holder # a reload under way
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
        return if @life.held_by_current? # inside close (its final flush's transaction): no new client now

        @life.exclusively do
          return if @life.closing_or_closed? || !@client.fatal_error

          previous = reconfigure(error, attempt)
          disconnect(error)
          @transactions.client_replaced
          begin
            @life.connect
          rescue Errors::ConfigurationInvalidError => e
            raise unless previous # librdkafka refused what a producer.reload listener set: back to what worked

            @monitor.instrument("error.occurred", producer_id: @id, type: "producer.reload", error: e)
            @config = previous
            previous = nil
            retry
          rescue StandardError
            @life.lost! # no client left: the producer cannot go on
            raise
          end
        end
        @monitor.instrument("producer.reloaded", producer_id: @id, error: error, attempt: attempt)
      end

      # Settings a listener made invalid are reported and left out: the new
      # client gets the producer's settings as they were. Listeners get the
      # settings with their secrets FILTERED (a payload is logged, and sent to
      # error trackers): a secret left so keeps its value, a new one is taken.
      # @return [Config, nil] the settings replaced, if any
      def reconfigure(error, attempt)
        kafka = Secrets.filter(@config.kafka)
        @monitor.instrument("producer.reload", producer_id: @id, error: error, attempt: attempt, caller: self, kafka: kafka)
        kafka = Secrets.unfilter(kafka, @config.kafka)
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
