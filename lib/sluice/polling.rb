# frozen_string_literal: true

module Sluice
  # How clients' librdkafka events are polled: Poller (:fd, one thread for
  # many clients), PollThread (:thread, one thread per client), and PolledClient (one
  # client's drain and dispatch, shared by both).
  module Polling
    # Thread variable naming the Poller or PollThread a thread runs for.
    THREAD_KEY = :sluice_polling

    # Is the current thread a polling thread (of any poller)? Listener code
    # running there must never take the thread down.
    def self.thread? = !Thread.current.thread_variable_get(THREAD_KEY).nil?

    @thread_priority = 0

    class << self
      # Ruby's priority (Thread#priority) for polling threads started from now
      # on, as WaterDrop's `Polling.setup { |config| config.thread_priority = -1 }`:
      # below 0 the application's threads get the GVL first. Default 0.
      attr_reader :thread_priority

      def thread_priority=(priority)
        raise ArgumentError, "thread_priority must be an Integer, got #{priority.inspect}" unless priority.is_a?(Integer)

        @thread_priority = priority
      end

      # WaterDrop's form: Sluice::Polling.setup { |config| config.thread_priority = -1 }
      def setup = yield(self)
    end
  end
end
