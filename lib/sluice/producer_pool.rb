# frozen_string_literal: true

begin
  require "connection_pool"
rescue LoadError
  raise LoadError, "Sluice::ProducerPool needs the connection_pool gem (Debian: ruby-connection-pool): add it to your Gemfile"
end

module Sluice
  # A pool of producers for threads that each need one of their own at a time
  # (transactional producers: one transaction per producer at a time), the
  # counterpart of WaterDrop::ConnectionPool, on the connection_pool library.
  #
  #   pool = Sluice::ProducerPool.new(size: 5, timeout: 5) do |config, index|
  #     config.kafka = { "bootstrap.servers": "127.0.0.1:9092", "transactional.id": "billing-#{index}" }
  #   end
  #   pool.with { |producer| producer.produce_sync(topic: "events", payload: "x") }
  #   pool.transaction { |producer| producer.produce_async(topic: "events", payload: "y") }
  #   pool.close
  #
  # Producers are built when first needed, each with its own index (0, 1,
  # ...), and all share sluice's one polling thread as any producers do.
  class ProducerPool
    # @param size [Integer] producers at most
    # @param timeout [Numeric] seconds #with waits for a free producer
    # @yieldparam config [Config] a new producer's settings
    # @yieldparam index [Integer] 0 for the first producer built, then 1, 2, ...
    def initialize(size:, timeout: 5, &configure)
      raise ArgumentError, "ProducerPool.new needs a block that fills in each producer's config" unless configure
      raise ArgumentError, "size must be a positive Integer, got #{size.inspect}" unless size.is_a?(Integer) && size.positive?
      raise ArgumentError, "timeout must be a positive number of seconds, got #{timeout.inspect}" unless timeout.is_a?(Numeric) && timeout.positive?

      @built = 0
      @lock = Mutex.new
      @pool = ConnectionPool.new(size: size, timeout: timeout) do
        index = @lock.synchronize { (@built += 1) - 1 }
        Producer.new { |config| configure.call(config, index) }
      end
    end

    # Lends a producer to the block (the same one for nested calls in this thread).
    # @raise [ConnectionPool::TimeoutError] none became free within timeout
    def with(&) = @pool.with(&)

    # Runs the block in a transaction of a pooled producer.
    def transaction
      with { |producer| producer.transaction { yield producer } }
    end

    # Closes every producer (those lent out as they come back); the pool takes no more calls.
    def close
      @pool.shutdown(&:close)
      nil
    end
    alias shutdown close

    def size = @pool.size

    # Producers free to lend now (or not built yet).
    def available = @pool.available
  end
end
