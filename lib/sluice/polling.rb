# frozen_string_literal: true

module Sluice
  # How clients' librdkafka events are polled: Poller (:fd, one thread for
  # many clients), PollThread (:thread, one thread per client), and State (one
  # client's drain and dispatch, shared by both).
  module Polling
    # Thread variable naming the Poller or PollThread a thread runs for.
    THREAD_KEY = :sluice_polling

    # Is the current thread a polling thread (of any poller)? Listener code
    # running there must never take the thread down.
    def self.thread? = !Thread.current.thread_variable_get(THREAD_KEY).nil?
  end
end
