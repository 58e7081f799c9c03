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
  # @example
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
      # @return [Monitor]
      def monitor = @monitor ||= Monitor.new

      # Builds the process's pool (replacing none: shut the old one down first).
      # @param size [Integer] producers at most
      # @param timeout [Numeric] ms #with waits for a free producer
      # @yieldparam config [Producer::Config] a new producer's settings
      # @yieldparam index [Integer] (optional) 1 for the first producer built, then 2, 3, ...
      # @return [ProducerPool]
      # @raise [ArgumentError] no block, or size or timeout out of range
      # @example
      #   Sluice::ProducerPool.setup(size: 3) { |config| config.kafka = { "bootstrap.servers": "127.0.0.1:9092" } }
      #   Sluice.with { |producer| producer.produce_async(topic: "events", payload: "x") }
      def setup(size: 5, timeout: 5_000, &configure)
        @default_pool = new(size: size, timeout: timeout, &configure)
        monitor.instrument("connection_pool.setup", pool: @default_pool, size: size, timeout: timeout)
        @default_pool
      end

      # Lends a producer of the process's pool to the block (see #with).
      # @yieldparam producer [Producer]
      # @return the block's value
      # @raise [Errors::ProducerClosedError] no pool was set up
      # @raise [ConnectionPool::TimeoutError] none became free within the pool's timeout
      def with(...) = configured.with(...)

      # Runs the block in a transaction of a producer of the process's pool (see #transaction).
      # @yieldparam producer [Producer]
      # @return the block's value (nil when aborted)
      # @raise [Errors::ProducerClosedError] no pool was set up
      def transaction(...) = configured.transaction(...)

      # @return [Hash, nil] { size:, available: } of the process's pool
      def stats = @default_pool&.stats

      # @return [Boolean] the process's pool is set up
      def active? = !@default_pool.nil?

      # Reloads the process's pool (see #reload); nothing without one.
      # @return [void]
      def reload
        return unless @default_pool

        @default_pool.reload
        monitor.instrument("connection_pool.reload", pool: @default_pool)
      end

      # Shuts the process's pool down (see #shutdown); the next .setup builds a new one.
      # @return [nil]
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
    # @raise [ArgumentError] no block, or size or timeout out of range
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
    # @yieldparam producer [Producer]
    # @return the block's value
    def with(&) = @pool.with(&)

    # Runs the block in a transaction of a pooled producer.
    # @yieldparam producer [Producer] the pooled producer, inside its transaction
    # @return the block's value (nil when aborted)
    # @raise [Errors::TransactionError] and what Producer#transaction raises
    # @raise [ConnectionPool::TimeoutError] none became free within timeout
    def transaction
      with { |producer| producer.transaction { yield producer } }
    end

    # @return [Integer] producers at most
    def size = @pool.size

    # @return [Integer] producers free to lend now (or not built yet)
    def available = @pool.available

    # @return [Hash] { size:, available: }
    def stats = { size: size, available: available }

    # Closes every producer (those lent out as they come back) and builds new
    # ones as they are needed: after a configuration change, or to recover.
    # @return [void]
    def reload
      @pool.reload(&:close)
      self.class.monitor.instrument("connection_pool.reloaded", pool: self)
    end

    # Closes every producer (those lent out as they come back); the pool takes no more calls.
    # @return [nil]
    def shutdown
      @pool.shutdown(&:close)
      self.class.monitor.instrument("connection_pool.shutdown", pool: self)
      nil
    end
    alias close shutdown
  end
end
