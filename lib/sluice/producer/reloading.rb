# frozen_string_literal: true

module Sluice
  class Producer
    # A producer's reload after a fatal error: the broken client destroyed
    # (its pending handles resolve with the fatal error), a new one built in
    # its place, under its ClientLife's lock. One client at a time: the old
    # one is destroyed before the new one is built.
    # @api private
    class Reloading
      # @param producer [Producer] handed to `producer.reload` listeners (event[:caller]), nothing more
      # @param life [ClientLife] the producer's: its client, settings and lock
      # @param deliveries [Deliveries] the producer's: disconnects the broken client
      def initialize(producer, life:, deliveries:)
        @producer = producer
        @life = life
        @deliveries = deliveries
      end

      # A produce met a destroyed client: was it replaced by a reload (then the
      # caller tries again with the new one) or is the producer really closed?
      def client_replaced?(client, error)
        return false if @life.closing_or_closed? || error.is_a?(Errors::ForkedProcessError)

        @life.wait_for_holder # a reload under way
        !client.equal?(@life.client)
      end

      # An idempotent (not transactional) producer met a fatal error: rebuild
      # the client and let the caller try again, when configured and within the
      # attempts of that call.
      def after_idempotent_fatal?(error, attempt)
        config = @life.config
        return false unless error.fatal? && config.idempotent? && !config.transactional? && config.reload_on_idempotent_fatal_error
        return false if config.non_reloadable_errors.include?(error.code)
        return false if attempt > config.max_attempts_on_idempotent_fatal_error

        reload!(error.kafka_error, attempt)
        sleep(config.wait_backoff_on_idempotent_fatal_error / 1000.0)
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
          return if @life.closing_or_closed? || !@life.client.fatal_error

          previous = reconfigure(error, attempt)
          @deliveries.disconnect(error)
          begin
            @life.connect
          rescue Errors::ConfigurationInvalidError => e
            raise unless previous # librdkafka refused what a producer.reload listener set: back to what worked

            instrument("error.occurred", type: "producer.reload", error: e)
            @life.reconfigure(previous)
            previous = nil
            retry
          rescue StandardError
            @life.lost! # no client left: the producer cannot go on
            raise
          end
        end
        instrument("producer.reloaded", error: error, attempt: attempt)
      end

      private

      # Settings a listener made invalid are reported and left out: the new
      # client gets the producer's settings as they were. Listeners get the
      # settings with their secrets FILTERED (a payload is logged, and sent to
      # error trackers): a secret left so keeps its value, a new one is taken.
      # @return [Config, nil] the settings replaced, if any
      def reconfigure(error, attempt)
        config = @life.config
        kafka = Secrets.filter(config.kafka)
        instrument("producer.reload", error: error, attempt: attempt, caller: @producer, kafka: kafka)
        kafka = Secrets.unfilter(kafka, config.kafka)
        return if kafka == config.kafka

        @life.reconfigure(config.with_kafka(kafka))
        config
      rescue Errors::ConfigurationInvalidError => e
        instrument("error.occurred", type: "producer.reload", error: e)
        nil
      end

      def instrument(name, **payload) = @life.monitor.instrument(name, producer_id: @life.id, **payload)
    end
  end
end
