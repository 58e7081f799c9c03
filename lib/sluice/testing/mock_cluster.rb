# frozen_string_literal: true

require_relative "mock_api_keys"

module Sluice
  module Testing
    # librdkafka's mock cluster: brokers on localhost ports, in this process,
    # speaking Kafka's protocol to real producers, consumers and admins (no
    # JVM, no broker to start). For specs: topics, consumer groups and offsets,
    # idempotence and transactions, and errors injected on demand. What it
    # does not model is in docs/TESTING.md.
    #
    # One owner releases it, once: #close (a second is a no-op), else when
    # it is collected or at process exit.
    #
    # @example
    #   Sluice::Testing::MockCluster.start(brokers: 3) do |cluster|
    #     cluster.create_topic("orders", partitions: 3)
    #     cluster.inject_errors(:produce, :not_leader_for_partition, count: 3)
    #     producer = Sluice::Producer.new { |config| config.kafka = { "bootstrap.servers": cluster.bootstrap_servers } }
    #     producer.produce_sync(topic: "orders", payload: "42") # retried three times, then delivered
    #     producer.close
    #   end
    class MockCluster
      # The linked librdkafka has no mock cluster (built without its mock header).
      UnavailableError = Class.new(Errors::BaseError)

      # A call on a closed cluster.
      ClosedError = Class.new(Errors::BaseError)

      # @return [Boolean] whether the linked librdkafka has the mock cluster
      def self.available? = Native.const_defined?(:MockCluster)

      # @return [Boolean] whether its mock takes #group_initial_rebalance_delay_ms= (librdkafka 2.0.2's does not)
      def self.initial_rebalance_delay? = available? && Native::MockCluster.method_defined?(:group_initial_rebalance_delay_ms)

      # Starts a cluster; with a block, yields it and closes it after.
      # @param brokers [Integer] how many brokers (ids 1..brokers)
      # @yieldparam cluster [MockCluster]
      # @return [MockCluster, Object] the cluster, or the block's value
      # @raise [UnavailableError] the linked librdkafka has no mock cluster
      def self.start(brokers: 1)
        cluster = new(brokers: brokers)
        return cluster unless block_given?

        begin
          yield cluster
        ensure
          cluster.close
        end
      end

      # Releases a cluster whose owner never closed it (collected, or at exit).
      # @api private
      def self.releaser(native) = proc { native.destroy }

      # @return [String] "host:port,..." for the clients' bootstrap.servers
      attr_reader :bootstrap_servers
      # @return [Integer] how many brokers it started with
      attr_reader :brokers

      # @param brokers [Integer] how many brokers (ids 1..brokers)
      # @raise [UnavailableError] the linked librdkafka has no mock cluster
      # @raise [ArgumentError] brokers is not a positive Integer
      def initialize(brokers: 1)
        unless self.class.available?
          raise UnavailableError, "librdkafka #{Sluice.librdkafka_version} was linked without its mock cluster (rdkafka_mock.h)"
        end
        raise ArgumentError, "brokers must be a positive Integer, got #{brokers.inspect}" unless brokers.is_a?(Integer) && brokers.positive?

        @brokers = brokers
        @native = Native::MockCluster.new(brokers)
        @bootstrap_servers = @native.bootstraps
        @closed = false
        ObjectSpace.define_finalizer(self, self.class.releaser(@native))
      end

      # The client settings that reach this cluster, for config.kafka.
      # @param extra [Hash] more librdkafka properties
      # @return [Hash]
      def kafka(**extra) = { "bootstrap.servers": bootstrap_servers }.merge(extra)

      # Creates a topic (the mock answers no CreateTopics: Admin#create_topic fails against it).
      # @param name [String]
      # @param partitions [Integer]
      # @param replication_factor [Integer] at most the number of brokers
      # @return [nil]
      # @raise [KafkaError] the mock refused it
      # @raise [ClosedError]
      def create_topic(name, partitions: 1, replication_factor: 1)
        code = live { |native| native.topic_create(name.to_s, partitions, replication_factor) }
        raise KafkaError, code unless code.zero?
      end

      # The next count requests of api fail with error, then requests are
      # answered again. Several errors (each count times) are returned in turn.
      # @param api [Symbol] a request: :produce, :fetch, :offset_commit, ... (MockCluster::API_KEYS)
      # @param errors [Array<Symbol>] Kafka error codes as KafkaError#code names them
      #   (:not_leader_for_partition, :msg_size_too_large, ...); :transport disconnects instead
      # @param count [Integer] how many requests each error answers
      # @return [nil]
      # @raise [ArgumentError] an unknown api or error, a local (client-side) error, or count not positive
      # @raise [ClosedError]
      # @example
      #   cluster.inject_errors(:produce, :not_leader_for_partition, count: 3)
      #   cluster.inject_errors(:offset_commit, :coordinator_load_in_progress, :not_coordinator)
      def inject_errors(api, *errors, count: 1)
        raise ArgumentError, "inject_errors needs at least one error" if errors.empty?
        raise ArgumentError, "count must be a positive Integer, got #{count.inspect}" unless count.is_a?(Integer) && count.positive?

        key = self.class.api_key(api)
        codes = errors.flat_map { |error| [broker_error(error)] * count }
        live { |native| native.push_request_errors(key, codes) }
      end

      # Drops the errors injected for api that no request met yet.
      # @param api [Symbol] as for #inject_errors
      # @return [nil]
      # @raise [ArgumentError] an unknown api
      # @raise [ClosedError]
      def clear_errors(api)
        key = self.class.api_key(api)
        live { |native| native.clear_request_errors(key) }
      end

      # Disconnects a broker's clients and refuses new connections (its
      # partitions keep it as leader: no failover).
      # @param id [Integer] 1..brokers
      # @return [nil]
      # @raise [ArgumentError] no such broker
      # @raise [ClosedError]
      def broker_down(id) = broker(id, :broker_set_down)

      # Accepts a broker's connections again.
      # @param id [Integer] 1..brokers
      # @return [nil]
      # @raise [ArgumentError] no such broker
      # @raise [ClosedError]
      def broker_up(id) = broker(id, :broker_set_up)

      # Delays every answer of a broker (a slow network or broker: a call
      # that waits for one takes that long), until set to 0 again.
      # @param id [Integer] 1..brokers
      # @param milliseconds [Integer] >= 0
      # @return [nil]
      # @raise [ArgumentError] no such broker, or a negative delay
      # @raise [ClosedError]
      def broker_rtt(id, milliseconds)
        raise ArgumentError, "the delay is an Integer >= 0 (ms), got #{milliseconds.inspect}" unless milliseconds.is_a?(Integer) && milliseconds >= 0

        broker(id, :broker_set_rtt, milliseconds)
      end

      # How long a new consumer group's first join waits for more members
      # (Kafka's group.initial.rebalance.delay.ms; the mock's default is 3000).
      # 0 makes a spec that subscribes join at once.
      # @param milliseconds [Integer]
      # @raise [UnavailableError] the linked librdkafka's mock has no such setting (2.0.2)
      # @raise [ClosedError]
      def group_initial_rebalance_delay_ms=(milliseconds)
        unless self.class.initial_rebalance_delay?
          raise UnavailableError, "librdkafka #{Sluice.librdkafka_version}'s mock cluster has no group.initial.rebalance.delay.ms"
        end
        raise ArgumentError, "the delay is an Integer >= 0 (ms), got #{milliseconds.inspect}" unless milliseconds.is_a?(Integer) && milliseconds >= 0

        live { |native| native.group_initial_rebalance_delay_ms(milliseconds) }
      end

      # Stops the brokers and releases the cluster; a second call does nothing.
      # Clients still connected see their brokers go away.
      # @return [nil]
      def close
        @closed = true
        ObjectSpace.undefine_finalizer(self)
        @native.destroy
      end

      # @return [Boolean]
      def closed? = @closed

      private

      def live
        raise ClosedError, "the mock cluster is closed" if @closed

        yield @native
      rescue IOError
        raise ClosedError, "the mock cluster is closed"
      end

      def broker_error(error)
        number = KafkaError.number_for(error)
        return number unless number.negative? && error != :transport

        raise ArgumentError, "#{error.inspect} is a client-side error: a broker answers with Kafka's codes (or :transport, a disconnect)"
      end

      def broker(id, call, *arguments)
        raise ArgumentError, "no broker #{id.inspect}: the cluster's are 1..#{@brokers}" unless id.is_a?(Integer) && id.between?(1, @brokers)

        code = live { |native| native.public_send(call, id, *arguments) }
        raise KafkaError, code unless code.zero?
      end
    end
  end
end
