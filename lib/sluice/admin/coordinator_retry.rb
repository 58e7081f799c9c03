# frozen_string_literal: true

module Sluice
  class Admin
    # A group's coordinator that moved, or that is still loading the group (a
    # broker started seconds before), answers a group call with an error the
    # same call gets past a moment later: Admin#reset_offsets on a fresh
    # cluster raised "Not coordinator". The call is made again after a
    # backoff, as Java's AdminClient does, until its max_wait_timeout ends:
    # each try gets only what is left of it, so the timeout still bounds the call.
    module CoordinatorRetry
      # What a coordinator answers while it moves or loads (LeaderWait's list).
      PENDING = Shared::LeaderWait::COORDINATOR_PENDING
      # s before the first retry, doubled after each one up to MAX_BACKOFF.
      BACKOFF = 0.05
      # (see BACKOFF)
      MAX_BACKOFF = 1.0

      module_function

      # Yields the ms left of timeout_ms, again while the block raises an
      # AdminError of PENDING and a try still fits after the backoff.
      # @return the block's value
      def call(timeout_ms)
        deadline = Shared::Clock.now + (timeout_ms / 1000.0)
        backoff = BACKOFF
        begin
          yield [Shared::Clock.ms_until(deadline), 1].max
        rescue Errors::AdminError => e
          raise unless PENDING.include?(e.code) && Shared::Clock.now + backoff < deadline

          sleep(backoff) # the coordinator gives no notice of being ready
          backoff = [backoff * 2, MAX_BACKOFF].min
          retry
        end
      end
    end
  end
end
