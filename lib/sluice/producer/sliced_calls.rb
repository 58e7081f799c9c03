# frozen_string_literal: true

module Sluice
  class Producer
    # Transaction calls librdkafka lets be made again after they timed out
    # (it resumes them where they stopped), made in slices: a close of
    # another thread takes over between two instead of waiting for a whole
    # call, and every slice ends by that close's deadline (Shared::ClientLife#wait_ms).
    # Mixed into Transactions, whose @life and @unfinished (the call timed
    # out and goes on in librdkafka) it reads.
    # @api private
    module SlicedCalls
      include Shared::Clock

      private

      # Yields one slice's timeout (ms), at most slice_ms and ending by
      # deadline; a slice that timed out is made again while time is left and
      # no close of another thread waits for it.
      def in_slices(deadline, slice_ms)
        yield @life.wait_ms(ms_until(deadline).clamp(1, slice_ms))
      rescue Errors::TransactionError
        retry if @unfinished && now < deadline && !@life.closing_elsewhere?
        raise
      end
    end
  end
end
