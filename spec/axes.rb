# frozen_string_literal: true

# What each axis of CI varies, and the spec files whose outcome can change with it. Every spec runs once on
# the default build, polling mode and broker (bin/test's :fd run, or its step: cluster, packaging, own broker);
# a step that varies one axis (.ci/run's header names them) runs that axis's files, not the whole suite again.
#
#   ruby spec/axes.rb AXIS     the axis's spec files, one a line (paths from the checkout's root)
#   ruby spec/axes.rb --check  fails if a pattern below matches no spec file (a rename would drop it silently)
#
# A new spec file runs in bin/test's :fd run without being named here; name it under an axis when its outcome
# depends on that axis (who polls, the selector, the Ruby or Debian build, the librdkafka or Kafka release).
module SpecAxes
  ROOT = File.expand_path("..", __dir__)

  # A smoke round trip: a producer's and a consumer's main paths, for the axes that vary what everything sits on.
  ROUND_TRIP = %w[integration/producer/produce_spec.rb integration/consumer/consumer_spec.rb].freeze

  PATTERNS = {
    # Who polls (:thread, one thread per client, beside the default :fd): the pollers themselves, clients' lives
    # and closes, forks, the paths of delivery reports, transactions and consumer closes, and what the polling
    # thread serves besides (OAuth refreshes, events).
    thread: %w[
      integration/polling/*_spec.rb integration/lifecycle/*_spec.rb integration/fork/*_spec.rb
      integration/oauth/*_spec.rb integration/instrumentation/instrumentation_spec.rb
      integration/producer/{produce,delivery_failures,partial_failures,status,buffering,batches,pool,variants,lines}_spec.rb
      integration/producer/transaction{s,_edges,_outage,_outcomes}_spec.rb integration/producer/close_deadline_spec.rb
      integration/consumer/{consumer,close_bounds,close_broker_down,close_after_rebalance,close_deadline}_spec.rb
      integration/consumer/{interrupted_reads,stopped_reads}_spec.rb
    ],
    # The selector the poller waits with (SLUICE_SELECTOR=poll beside epoll): its own specs, the poller's
    # wake-ups, closes and forks, and a round trip.
    selector: %w[
      sluice/selector_spec.rb sluice/selector_interrupt_spec.rb
      integration/polling/*_spec.rb integration/lifecycle/*_spec.rb integration/fork/*_spec.rb
    ] + ROUND_TRIP,
    # What talks Kafka's protocol, for another librdkafka (the system's, 2.15.0) or another broker (Kafka 4, classic
    # groups): producing, idempotence and transactions, consumer groups and offsets, the admin, authentication,
    # and librdkafka's statistics. Not the Ruby-only machinery (pollers, lifecycles, forks, parallel reads, the
    # test doubles, the CLI and docs, which reach librdkafka only through the clients whose specs run here).
    # The share consumer's need Kafka 4.2+ (bin/test-kafka4's 4.4.0) and librdkafka 2.15.0: they skip elsewhere.
    protocol: %w[
      integration/producer/*_spec.rb integration/admin/*_spec.rb integration/oauth/*_spec.rb
      integration/consumer/{consumer,authentication,close_bounds,close_broker_down,close_after_rebalance}_spec.rb
      integration/consumer/{groups,group_protocol,interrupted_reads,offset_fetch_retry,poll_store,positions}_spec.rb
      integration/consumer/{close_deadline,finished_above,revoke_commit_failure,left_behind_recovery,partition_turns}_spec.rb
      integration/instrumentation/instrumentation_spec.rb integration/testing/mock_cluster_spec.rb
      integration/share_consumer/*_spec.rb
    ],
    # Another Debian and Ruby (bin/test-root): the build, the unit specs, the fiber scheduler (the Ruby's), a
    # round trip; the CLI and docs on the newest Ruby only (bin/test-root adds them for sid).
    root: %w[sluice/**/*_spec.rb integration/polling/fiber_scheduler_spec.rb] + ROUND_TRIP,
    cli: %w[integration/cli/*_spec.rb integration/docs/*_spec.rb]
  }.freeze

  # @return [Array<String>] the axis's spec files, from the checkout's root
  def self.files(axis)
    PATTERNS.fetch(axis).flat_map { |pattern| matches(pattern) }.uniq
  end

  # @return [Array<String>] the patterns that match no spec file
  def self.unmatched = PATTERNS.values.flatten.uniq.select { |pattern| matches(pattern).empty? }

  def self.matches(pattern)
    Dir.glob("spec/#{pattern}", base: ROOT).sort
  end
end

if $PROGRAM_NAME == __FILE__
  case ARGV
  in ["--check"]
    missing = SpecAxes.unmatched
    abort "spec/axes.rb: no spec file matches #{missing.join(", ")}" if missing.any?
  in [axis] if SpecAxes::PATTERNS.key?(axis.to_sym)
    puts SpecAxes.files(axis.to_sym)
  else
    abort "usage: ruby spec/axes.rb #{SpecAxes::PATTERNS.keys.join("|")}|--check"
  end
end
