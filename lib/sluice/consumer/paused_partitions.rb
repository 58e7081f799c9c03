# frozen_string_literal: true

module Sluice
  class Consumer
    # What the read's own pauses share (PartitionShares, Failure::RetryPauses):
    # a partition they paused is resumed through @resume (Consumer#resume),
    # and one no longer ours (given up in a rebalance, the consumer closed)
    # counts as resumed: there is nothing left to resume.
    # @api private
    module PausedPartitions
      private

      # @return [true] resumed, or no longer ours to resume
      def resume(pair)
        @resume.call(*pair)
        true
      rescue Errors::BaseError
        true
      end
    end
  end
end
