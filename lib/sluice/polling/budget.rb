# frozen_string_literal: true

module Sluice
  module Polling
    # One client's turn against its max_time: the deadline, and the first
    # dispatched item that ran past it, so poller.budget_exceeded can name
    # the event whose listeners overran (a slow listener, not the volume).
    # One per client, reset each turn: a turn allocates nothing.
    class Budget
      include Shared::Clock

      # The event each kind of drained event is dispatched as.
      EVENT_NAMES = { error: "error.occurred", statistics: "statistics.emitted", oauthbearer_token_refresh: "oauthbearer.token_refresh",
                      offset_commit: "consumer.offsets_committed", admin_result: "admin result", log: "log" }.freeze

      # How a listener is named: its class and method, or where its block is.
      # @param listener [#call] a Monitor listener
      # @return [String]
      def self.name_of(listener)
        case listener
        when Method then "#{listener.receiver.class.name}##{listener.name}"
        when Proc then "block at #{listener.source_location&.join(":")}"
        else listener.class.name
        end
      end

      # When the turn must end (monotonic s), or nil (no limit).
      attr_reader :deadline

      # @param purge_errors [Array<Integer>] the codes of a purged message's report
      def initialize(purge_errors)
        @purge_errors = purge_errors
        reset(nil)
      end

      # A new turn, from now for budget_ms (negative: no limit).
      # @return [Float] now
      def start(budget_ms)
        at = now
        reset(budget_ms.negative? ? nil : at + (budget_ms / 1000.0))
        at
      end

      # The ms left (0 once past), or -1 without a limit.
      def left_ms = @deadline ? [(@deadline - now) * 1000, 0].max : -1

      # Before a batch is dispatched: its first item starts now.
      def batch_started = @deadline && (@item_at = now)

      # After an item was dispatched (head and code as drained): past the
      # deadline? The first item that ends past it is remembered.
      def past?(head, code)
        return false unless @deadline

        at = now
        started = @item_at
        @item_at = at
        return false if at < @deadline

        @overrun ||= [event_name(head, code), ((at - started) * 1000).round(1)]
        true
      end

      # [event, ms the item took] of the item that ran past the deadline, or nil.
      attr_reader :overrun

      private

      def reset(deadline)
        @deadline = deadline
        @item_at = nil
        @overrun = nil
      end

      # A failed delivery is dispatched as error.occurred or message.purged.
      def event_name(head, code)
        return EVENT_NAMES.fetch(head, head.to_s) if head.is_a?(Symbol)
        return "message.acknowledged" if code.zero?

        @purge_errors.include?(code) ? "message.purged" : "error.occurred"
      end
    end
  end
end
