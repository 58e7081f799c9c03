# frozen_string_literal: true

module Sluice
  module Instrumentation
    # Adds to librdkafka's statistics how each number changed since the
    # previous emission: for every numeric "key", a "key_d" next to it (0 the
    # first time), at every depth, like karafka-core's StatisticsDecorator.
    # One per client: deltas only mean something between emissions of the
    # same librdkafka handle. The poller runs it only when someone listens to
    # `statistics.emitted`; emissions nobody heard are not part of a delta.
    class StatisticsDecorator
      # Appended to a key's name for its delta ("txmsgs" -> "txmsgs_d").
      SUFFIX = "_d"

      # A new decorator knows no previous emission: its first deltas are 0.
      def initialize
        @previous = nil
      end

      # @param statistics [Hash] parsed librdkafka statistics; changed in place
      # @return [Hash] statistics, with the _d keys
      def call(statistics)
        decorate(@previous, statistics)
        @previous = statistics
        statistics
      end

      private

      def decorate(previous, current)
        deltas = nil
        current.each_pair do |key, value|
          case value
          when Hash
            decorate(previous.is_a?(Hash) ? previous[key] : nil, value)
          when Numeric
            before = previous[key] if previous.is_a?(Hash)
            (deltas ||= {})["#{key}#{SUFFIX}"] = before.is_a?(Numeric) ? value - before : 0
          end
        end
        current.merge!(deltas) if deltas # not while iterating it
      end
    end
  end
end
