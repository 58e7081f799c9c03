# frozen_string_literal: true

module Sluice
  module Shared
    # Closes at process exit the clients the application left open, so what they
    # still hold is delivered (bounded by each one's max_wait_timeout) or its
    # loss is reported: nothing is dropped silently.
    #
    # A client is tracked from creation to close. The at_exit hook is installed
    # with the first one; hooks run last-registered-first, so an application's
    # own at_exit closes (usually registered later) still run before it. In a
    # forked child the parent's clients are only let go of.
    module Shutdown
      @open = {}.compare_by_identity
      @lock = Mutex.new
      @hooked = false

      class << self
        # Tracks a client from creation (installing the at_exit hook with the first).
        # @api private
        def track(client)
          @lock.synchronize do
            @open[client] = true
            hook unless @hooked
          end
        end

        # Forgets a closed client.
        # @api private
        def untrack(client) = @lock.synchronize { @open.delete(client) }

        # Clients created and not closed yet (in this process or an ancestor).
        def open_clients = @lock.synchronize { @open.keys }

        # What the at_exit hook does; safe to call more than once.
        def close_all
          open_clients.each do |client|
            client.close_at_exit
          rescue StandardError => e
            warn("sluice: closing #{client.inspect} at exit failed: #{e.class}: #{e.message}")
          end
        end

        private

        def hook
          @hooked = true
          at_exit { close_all }
        end
      end
    end
  end
end
