# frozen_string_literal: true

module Sluice
  module Auth
    # What a built-in OAUTHBEARER token provider shares: it is a monitor
    # listener that answers every oauthbearer.token_refresh with its #token
    # (or, when that fails, with the failure: librdkafka reports it and asks
    # again). Subscribe one to the monitor of the clients it serves
    # (config.monitor, shared before new: the first refresh comes inside new).
    #
    # The includer defines #token, returning a Token.
    module TokenProvider
      # A token for librdkafka: its value, when it expires (ms since the
      # epoch), the principal it names, SASL extensions.
      Token = Struct.new(:value, :expires_at_ms, :principal, :extensions)

      # Answers the client that asked (event[:bearer]).
      # @param event [Monitor::Event] oauthbearer.token_refresh
      # @return [Token, Exception] the token librdkafka took, or why there is none (told to librdkafka as a failure)
      def on_oauthbearer_token_refresh(event)
        bearer = event[:bearer]
        token = self.token
        bearer.oauthbearer_set_token(token: token.value, lifetime_ms: token.expires_at_ms, principal_name: token.principal,
                                     extensions: token.extensions || {})
        token
      rescue Errors::BaseError, KafkaError => e
        bearer.oauthbearer_set_token_failure("#{self.class.name}: #{e.message}") unless e.is_a?(Errors::ClientClosedError)
        e
      end
    end
  end
end
