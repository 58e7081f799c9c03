# frozen_string_literal: true

begin
  require "connection_pool"
rescue LoadError
  raise LoadError, "Sluice::ProducerPool needs the connection_pool gem (Debian: ruby-connection-pool): add it to your Gemfile"
end

module Sluice
  # A pool of producers for threads that each need one of their own at a time
  # (transactional producers: one transaction per producer at a time): WaterDrop::ConnectionPool
  # with its arguments and surface, on the connection_pool library.
  #
  #   pool = Sluice::ProducerPool.new(size: 5, timeout: 5_000) do |config, index|
  #     config.kafka = { "bootstrap.servers": "127.0.0.1:9092", "transactional.id": "billing-#{index}" }
  #   end
  #   pool.with { |producer| producer.produce_sync(topic: "events", payload: "x") }
  #   pool.transaction { |producer| producer.produce_async(topic: "events", payload: "y") }
  #   pool.close
  #
  # Or one pool for the process: ProducerPool.setup(size: 5) { |config| ... },
  # then ProducerPool.with / .transaction / .stats / .reload / .shutdown (and
  # Sluice.with, Sluice.transaction, Sluice.pool), as WaterDrop has them.
  #
  # Producers are built when first needed, numbered 1, 2, 3... (the index
  # the block gets), and all share sluice's one polling thread as any
  # producers do. The pool's own events (connection_pool.created, .setup,
  # .reload, .reloaded, .shutdown) go to ProducerPool.monitor.
  class ProducerPool
    class << self
      # The process's pool (ProducerPool.setup), or nil.
      attr_reader :default_pool

      # Where pools report connection_pool.* events.
      def monitor = @monitor ||= Monitor.new

      # Builds the process's pool (replacing none: shut the old one down first).
      # @return [ProducerPool]
      def setup(size: 5, timeout: 5_000, &configure)
        @default_pool = new(size: size, timeout: timeout, &configure)
        monitor.instrument("connection_pool.setup", pool: @default_pool, size: size, timeout: timeout)
        @default_pool
      end

      def with(...) = configured.with(...)

      def transaction(...) = configured.transaction(...)

      # @return [Hash, nil] { size:, available: } of the process's pool
      def stats = @default_pool&.stats

      def active? = !@default_pool.nil?

      def reload
        return unless @default_pool

        @default_pool.reload
        monitor.instrument("connection_pool.reload", pool: @default_pool)
      end

      def shutdown
        return unless (pool = @default_pool)

        @default_pool = nil
        pool.shutdown
      end
      alias close shutdown

      private

      def configured = @default_pool || raise(Errors::ProducerClosedError, "no producer pool: call Sluice::ProducerPool.setup first")
    end

    # The underlying ConnectionPool (its other features).
    attr_reader :pool

    # @param size [Integer] producers at most
    # @param timeout [Numeric] milliseconds #with waits for a free producer (WaterDrop's unit)
    # @yieldparam config [Config] a new producer's settings
    # @yieldparam index [Integer] 1 for the first producer built, then 2, 3, ... (with a block of two parameters)
    def initialize(size: 5, timeout: 5_000, &configure)
      raise ArgumentError, "ProducerPool.new needs a block that fills in each producer's config" unless configure
      raise ArgumentError, "size must be a positive Integer, got #{size.inspect}" unless size.is_a?(Integer) && size.positive?
      unless timeout.is_a?(Numeric) && timeout.positive?
        raise ArgumentError, "timeout must be a positive number of milliseconds, got #{timeout.inspect}"
      end

      @built = 0
      @lock = Mutex.new
      @pool = ConnectionPool.new(size: size, timeout: timeout / 1000.0) do
        index = @lock.synchronize { @built += 1 }
        Producer.new { |config| configure.arity == 1 ? configure.call(config) : configure.call(config, index) }
      end
      self.class.monitor.instrument("connection_pool.created", pool: self, size: size, timeout: timeout)
    end

    # Lends a producer to the block (the same one for nested calls in this thread).
    # @raise [ConnectionPool::TimeoutError] none became free within timeout
    def with(&) = @pool.with(&)

    # Runs the block in a transaction of a pooled producer.
    def transaction
      with { |producer| producer.transaction { yield producer } }
    end

    def size = @pool.size

    # Producers free to lend now (or not built yet).
    def available = @pool.available

    def stats = { size: size, available: available }

    # Closes every producer (those lent out as they come back) and builds new
    # ones as they are needed: after a configuration change, or to recover.
    def reload
      @pool.reload(&:close)
      self.class.monitor.instrument("connection_pool.reloaded", pool: self)
    end

    # Closes every producer (those lent out as they come back); the pool takes no more calls.
    def shutdown
      @pool.shutdown(&:close)
      self.class.monitor.instrument("connection_pool.shutdown", pool: self)
      nil
    end
    alias close shutdown
  end
end
