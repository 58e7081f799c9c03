# frozen_string_literal: true

require "delegate"

module Sluice
  class Producer
    # A view of a producer with its own topic-level librdkafka settings and
    # wait: `producer.with(topic_config: { "acks": "all" }, max_wait_timeout: 30_000)`.
    # It shares the producer's client, connections, buffer, middleware and
    # monitor; everything it produces uses its topic settings (native topic
    # handles of its own, cached per producer) and waits max_wait_timeout.
    #
    # Variants are cheap: build them once and keep them. Close the producer,
    # not the variant (closing either closes the one producer).
    class Variant < SimpleDelegator
      # The producing methods: they run with this variant's settings.
      PRODUCING = %i[produce_async produce_sync produce_many_async produce_many_sync
                     tombstone_async tombstone_sync tombstone_many_async tombstone_many_sync
                     flush_async flush_sync].freeze

      # Fiber-local: the variant a producing call runs under.
      KEY = :__sluice_variant
      # Top-level constants are written ::Thread here: Variant descends from
      # Delegator, a BasicObject, so a bare `Thread` misses Object and goes
      # through Delegator.const_missing on every call, uncached (150 ns of
      # every produce_async, a variant or not).

      # The producer it views, its topic settings (frozen), the id the native
      # client knows them by (0: the producer's own), and its wait (ms).
      attr_reader :producer, :topic_config, :topic_config_id, :max_wait_timeout

      # Producer#with builds variants.
      # @api private
      # @param producer [Producer]
      # @param topic_config [Hash]
      # @param topic_config_id [Integer]
      # @param max_wait_timeout [Numeric] ms
      def initialize(producer, topic_config:, topic_config_id:, max_wait_timeout:)
        super(producer)
        @producer = producer
        @topic_config = topic_config.freeze
        @topic_config_id = topic_config_id
        @max_wait_timeout = max_wait_timeout
      end

      # @return [Boolean] same settings and wait as the producer itself
      def default? = @topic_config_id.zero? && @max_wait_timeout == @producer.config.max_wait_timeout

      PRODUCING.each do |name|
        define_method(name) { |*args, **options| use { @producer.public_send(name, *args, **options) } }
      end

      # The variant a producing call of `producer` runs under, if any.
      # @api private
      # @param producer [Producer]
      # @return [Variant, nil]
      def self.current(producer)
        variant = ::Thread.current[KEY]
        variant if variant&.producer.equal?(producer)
      end

      # @return [String] the producer, topic settings and wait
      def inspect = "#<#{self.class.name} of #{@producer.inspect} topic_config=#{@topic_config.inspect} max_wait_timeout=#{@max_wait_timeout}>"

      private

      def use
        previous = ::Thread.current[KEY]
        ::Thread.current[KEY] = self
        yield
      ensure
        ::Thread.current[KEY] = previous
      end
    end
  end
end
