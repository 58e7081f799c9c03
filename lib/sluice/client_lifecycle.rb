# frozen_string_literal: true

module Sluice
  # What every kind of client (Producer, Consumer, Admin) shares in its
  # lifecycle: closing from a signal handler, and the notifier of a client
  # whose main-queue events nobody waits on.
  module ClientLifecycle
    # How long a close started from a signal handler is waited for there
    # beyond its own timeout; after that it finishes in the background.
    TRAP_GRACE = 10 # s
    # The notifier of clients without delivery handles (consumers, admins).
    NO_WAITERS = Object.new.tap { |o| o.define_singleton_method(:notify) { nil } }.freeze

    private

    # What every client keeps of the settings filled in its new's block
    # (validated and frozen first): id, monitor, poller, and an open state.
    def configure(config)
      yield config if block_given?
      @config = config.validate!.freeze
      @id = @config.id
      @monitor = @config.monitor || Monitor.new(logger: @config.logger)
      @poller = @config.polling.mode == :thread ? Polling::PollThread.new : (@config.polling.poller || Polling::Poller.instance)
      @lifecycle = Mutex.new
      @closed = false
    end

    # A signal handler may not lock a Mutex, and the code it interrupted may
    # hold one that close needs: the close runs on a thread of its own,
    # waited for here (timeout_ms + TRAP_GRACE). If it still runs when the
    # handler returns, it finishes once the interrupted code goes on, or in
    # the at_exit hook. No logging here: Logger locks a Mutex.
    def close_on_own_thread(timeout_ms, &close)
      closer = Thread.new(&close)
      closer.name = "sluice.close##{@id}"
      closer.report_on_exception = false
      closer.join((timeout_ms / 1000.0) + TRAP_GRACE)
      nil
    end
  end
end
