# frozen_string_literal: true

require "logger"
require_relative "sluice/version"
require_relative "sluice/errors"
require_relative "sluice/shared"
require_relative "sluice/shared/clock"
require_relative "sluice/native_extension"
Sluice::NativeExtension.load
require_relative "sluice/kafka_error"
require_relative "sluice/shared/leader_wait"
require_relative "sluice/shared/refusable_read"
require_relative "sluice/shared/blocking"
require_relative "sluice/shared/shutdown"
require_relative "sluice/shared/secrets"
require_relative "sluice/shared/client_life"
require_relative "sluice/shared/client_hooks"
require_relative "sluice/shared/kafka_property"
require_relative "sluice/shared/client_config"
require_relative "sluice/producer/config"
require_relative "sluice/monitor"
require_relative "sluice/message"
require_relative "sluice/middleware"
require_relative "sluice/instrumentation/statistics_decorator"
require_relative "sluice/shared/shown"
require_relative "sluice/instrumentation/logger_listener"
require_relative "sluice/instrumentation/metrics"
require_relative "sluice/instrumentation/metrics_listener"
require_relative "sluice/instrumentation/prometheus_listener" # requires prometheus-client-mmap only when built
require_relative "sluice/instrumentation/statsd_listener" # requires statsd-ruby only when built
require_relative "sluice/delivery"
require_relative "sluice/delivery/report"
require_relative "sluice/delivery/handle"
require_relative "sluice/delivery/notifier"
require_relative "sluice/polling"
require_relative "sluice/polling/auth_watch"
require_relative "sluice/polling/budget"
require_relative "sluice/polling/polled_client"
require_relative "sluice/polling/schedule"
require_relative "sluice/polling/poller"
require_relative "sluice/polling/poll_thread"
require_relative "sluice/polling/statistics_thread"
require_relative "sluice/polling/refresh_thread"
require_relative "sluice/producer/partitioner"
require_relative "sluice/producer/failure_backoff"
require_relative "sluice/producer/transaction"
require_relative "sluice/producer/sliced_calls"
require_relative "sluice/producer/transactions"
require_relative "sluice/producer/deliveries"
require_relative "sluice/producer/reloading"
require_relative "sluice/producer/closing"
require_relative "sluice/producer/enqueuer"
require_relative "sluice/producer/variant"
require_relative "sluice/producer/topic_configs"
require_relative "sluice/producer/buffer"
require_relative "sluice/producer/buffering"
require_relative "sluice/producer/tombstones"
require_relative "sluice/producer"
require_relative "sluice/consumer/config"
require_relative "sluice/consumer/arguments"
require_relative "sluice/consumer/rendering"
require_relative "sluice/consumer/left_behind"
require_relative "sluice/consumer/rebalancer"
require_relative "sluice/consumer/finished_offsets"
require_relative "sluice/consumer/ledger"
require_relative "sluice/consumer/lanes"
require_relative "sluice/consumer/thread_pool"
require_relative "sluice/consumer/fiber_pool"
require_relative "sluice/consumer/workers"
require_relative "sluice/consumer/paused_partitions"
require_relative "sluice/consumer/failure"
require_relative "sluice/consumer/parallelism"
require_relative "sluice/consumer/partition_shares"
require_relative "sluice/consumer/parallel_reading"
require_relative "sluice/consumer/inbox"
require_relative "sluice/consumer/lifecycle"
require_relative "sluice/consumer"
require_relative "sluice/share_consumer"
require_relative "sluice/share_consumer/config"
require_relative "sluice/share_consumer/record"
require_relative "sluice/share_consumer/acknowledgements"
require_relative "sluice/admin/config"
require_relative "sluice/admin/requests"
require_relative "sluice/admin/transport"
require_relative "sluice/admin/coordinator_retry"
require_relative "sluice/admin/lifecycle"
require_relative "sluice/admin/groups"
require_relative "sluice/admin"
require_relative "sluice/dead_letter"
require_relative "sluice/dead_letter_queue"

# Kafka producers, consumers and admin clients over librdkafka, with every client's events polled from one thread.
module Sluice
  autoload :ProducerPool, File.expand_path("sluice/producer_pool", __dir__) # needs the connection_pool gem: loaded when used
  autoload :Auth, File.expand_path("sluice/auth", __dir__) # built-in token providers: net/http loaded when used

  # @return [String] the version of the librdkafka library loaded at run time, e.g. "2.14.2"
  def self.librdkafka_version = Native.librdkafka_version

  # Lends a producer of the process's pool (ProducerPool.setup) to the block, as WaterDrop.with.
  # @yieldparam producer [Producer]
  # @return the block's value
  # @raise [Errors::ProducerClosedError] no pool was set up
  # @see ProducerPool#with
  def self.with(...) = ProducerPool.with(...)

  # Runs the block in a transaction on a producer of the process's pool, as WaterDrop.transaction.
  # @yieldparam producer [Producer]
  # @return the block's value (nil when aborted)
  # @raise [Errors::ProducerClosedError] no pool was set up
  # @see Producer#transaction
  def self.transaction(...) = ProducerPool.transaction(...)

  # @return [ProducerPool, nil] the process's producer pool (ProducerPool.setup)
  def self.pool = ProducerPool.default_pool
end
