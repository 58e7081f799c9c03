# frozen_string_literal: true

module Sluice
  module Polling
    # Tells, from librdkafka's error events, when an authentication or TLS
    # failure keeps every broker down: an :authentication or :ssl error, then
    # all_brokers_down. Nothing else says so: librdkafka only reconnects.
    # A reconnect that fails again says so again, and what was produced
    # meanwhile fails too: librdkafka 2.14 repeats all_brokers_down after each
    # failed attempt (the unchanged authentication error only once); 2.0.2
    # repeats the authentication error once and not all_brokers_down (every
    # broker was down already), so an authentication error seen while every
    # broker is down counts as both. (Then 2.0.2 stays silent: docs/BUILDING.md, "What the
    # system's librdkafka lacks".)
    #
    # An untrusted broker certificate is a TLS failure whatever code it comes
    # with: librdkafka 2.0.2 reports it as :ssl or as :transport, depending on
    # when the handshake noticed (under load, half of the first reports were
    # :transport). Only that reason is taken: a connection lost during a
    # handshake (a broker restarting) stays a transport error.
    #
    # A failure the brokers have got over is no explanation: librdkafka says
    # nothing when a reconnect succeeds, so the client's progress (messages
    # delivered or fetched, Native client #progress) tells. Progress since
    # the failure was seen makes it stale: an all_brokers_down after that (a
    # broker restarting) is not a refusal, and purges nothing.
    #
    # Under a lock: the poller observes errors while the client's refresh
    # thread answers tokens (RefreshThread), and readers ask meanwhile.
    class AuthWatch
      include Shared::Clock

      # The code that only says no broker is usable, not why.
      ALL_BROKERS_DOWN = :all_brokers_down
      # A transport error whose description says TLS refused the broker's certificate.
      UNTRUSTED_CERTIFICATE = /certificate verify failed/
      # A failure still explains all_brokers_down this long (s) after it was
      # last seen: librdkafka's reconnect backoff tops out at 10 s, and it
      # does not repeat an unchanged error at each attempt.
      FRESH = 15

      # @param progress [#call] the client's progress count (Native client #progress)
      def initialize(progress: -> { 0 })
        @progress = progress
        @lock = Mutex.new
        @failure = nil
        @seen_at = 0
        @progress_at = nil # the progress count when the failure was seen
        @all_down = false # all_brokers_down seen while the failure was current
        @token_refused = false # the failure is the application's answer that it has no token
      end

      # @return [KafkaError, nil] the failure, when this error says that it
      #   now keeps every broker down
      def observe(error)
        error = tls_failure(error)
        @lock.synchronize do
          if error.authentication?
            @all_down &&= !fresh.nil? # a stale failure says nothing about brokers now
            @failure = error
            @seen_at = now
            @progress_at = @progress.call
            error if @all_down
          elsif error.code == ALL_BROKERS_DOWN && fresh
            @seen_at = now
            @all_down = true
            @failure
          end
        end
      end

      # The application answered a token refresh with a failure: no broker
      # can be reached until it sets a token.
      # @return [KafkaError] the failure, which now keeps every broker down
      def token_failed(error)
        @lock.synchronize do
          @failure = error
          @seen_at = now
          @progress_at = @progress.call
          @all_down = true
          @token_refused = true
        end
        error
      end

      # A token was set: a failure of the token no longer explains anything.
      def token_set = @lock.synchronize { forget }

      # The failure while the application's own answer stands that it has no
      # token (until it sets one), or nil: certain, so a reader raises it at
      # once on every read, not once per report.
      def token_refusal = @lock.synchronize { @token_refused ? @failure : nil }

      # The failure while it keeps every broker down (all_brokers_down came
      # with it), or nil.
      def refusing = @lock.synchronize { (failure = fresh) && @all_down ? failure : nil }

      # The failure while it may still explain brokers being down, or nil.
      def current = @lock.synchronize { fresh }

      private

      def fresh
        failure = @failure
        return unless failure && now - @seen_at < FRESH
        return forget if @progress.call != @progress_at # the brokers accepted the client since

        failure
      end

      def tls_failure(error)
        return error unless error.code == :transport && UNTRUSTED_CERTIFICATE.match?(error.description.to_s)

        KafkaError.new(KafkaError.number_for(:ssl), error.description, fatal: error.fatal?)
      end

      def forget
        @failure = nil
        @all_down = false
        @token_refused = false
        nil
      end
    end
  end
end
