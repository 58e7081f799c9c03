# frozen_string_literal: true

module Sluice
  class Producer
    # One transaction of a producer (Transactions holds the open one): who
    # runs it, where it stands (:opening, :open, :ending, or :aborted once
    # close took it over), its first delivery handle (see
    # config.wait_timeout_on_transaction_abort), when it started, and whether
    # a commit was sent (commit_sent) and then refused for certain (aborted).
    Transaction = Struct.new(:fiber, :thread, :state, :first_handle, :started_at, :commit_sent, :aborted) do
      # Notes the first handle produced in it (every produce calls this).
      def note(handle) = (self.first_handle ||= handle)
    end
  end
end
