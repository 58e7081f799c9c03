# frozen_string_literal: true

module Sluice
  class Consumer
    # each_message's concurrency settings, checked (see Consumer#each_message).
    Parallelism = Struct.new(:concurrency, :ordering, :max_buffered, :max_buffered_bytes, :finish_within, keyword_init: true) do
      def initialize(**)
        super
        self.max_buffered ||= concurrency.is_a?(Integer) ? concurrency * Parallelism::BUFFERED_PER_WORKER : nil
        check
      end

      def parallel? = concurrency > 1

      private

      def check
        positive_integer(:concurrency)
        positive_integer(:max_buffered)
        positive_integer(:max_buffered_bytes)
        raise ArgumentError, "ordering is one of :key, :partition, :none, got #{ordering.inspect}" unless Lanes::ORDERINGS.include?(ordering)
        raise ArgumentError, "max_buffered (#{max_buffered}) must be at least concurrency (#{concurrency})" if max_buffered < concurrency
        return if finish_within.is_a?(Numeric) && finish_within >= 0

        raise ArgumentError, "finish_within is a number of milliseconds, got #{finish_within.inspect}"
      end

      def positive_integer(name)
        value = public_send(name)
        raise ArgumentError, "#{name} must be a positive Integer, got #{value.inspect}" unless value.is_a?(Integer) && value.positive?
      end
    end

    # Buffered messages per block at once, when max_buffered is not given:
    # enough for every worker to find the next message of another key at hand.
    Parallelism::BUFFERED_PER_WORKER = 8
  end
end
