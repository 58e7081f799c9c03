# frozen_string_literal: true

module Sluice
  module Shared
    # The librdkafka properties whose values are secrets, and the printable
    # forms of what holds them: a config's inspect, an event's payload, an
    # error message built from a setting. Whatever the key's spelling (Symbol
    # or String), a value of a sensitive property is shown as FILTERED.
    module Secrets
      # What a secret is shown as.
      FILTERED = "[FILTERED]"
      # Any *.password, *.secret or *passphrase (sasl.password, ssl.key.password,
      # sasl.oauthbearer.client.secret, ...), the PEM of a private key, every
      # keystore setting, and sasl.oauthbearer.config (an unsecured token's claims).
      SENSITIVE = /password|secret|passphrase|\Assl\.key\.pem\z|\Assl\.keystore\.|\Asasl\.oauthbearer\.config\z|private\.key/i
      # Event payload keys that hold a sensitive property's value under another
      # name: oauthbearer.token_refresh's bearer_config is sasl.oauthbearer.config.
      PAYLOAD_SECRETS = %i[bearer_config].freeze

      module_function

      # @param name [String, Symbol] a librdkafka property
      # @return [Boolean] its value is a secret
      def sensitive?(name) = SENSITIVE.match?(name.to_s)

      # @param kafka [Hash] librdkafka properties
      # @return [Hash] the same, each secret value replaced by FILTERED
      def filter(kafka) = kafka.to_h { |name, value| [name, sensitive?(name) ? FILTERED : value] }

      # What an event's inspect shows of its payload: any Hash in it (the
      # settings producer.reload hands out) filtered too.
      # @param payload [Hash]
      # @return [Hash] the same, each secret value replaced by FILTERED
      def filter_payload(payload)
        payload.to_h do |name, value|
          next [name, FILTERED] if sensitive?(name) || PAYLOAD_SECRETS.include?(name)

          [name, value.is_a?(Hash) ? filter_payload(value) : value]
        end
      end

      # The settings a listener was handed filtered, and may have changed, as
      # the client takes them: a value it left FILTERED is the original's.
      # @param changed [Hash] filter(original), as the listener left it
      # @param original [Hash] librdkafka properties
      # @return [Hash]
      def unfilter(changed, original)
        changed.to_h { |name, value| [name, sensitive?(name) && value == FILTERED && original.key?(name) ? original[name] : value] }
      end

      # @param text [String]
      # @param kafka [Hash] librdkafka properties
      # @return [String] text with every secret value of kafka in it replaced by FILTERED
      def scrub(text, kafka)
        kafka.each do |name, value|
          secret = value.to_s
          text = text.gsub(secret, FILTERED) if sensitive?(name) && !secret.empty?
        end
        text
      end

      # Runs the block; a ConfigurationInvalidError out of it (librdkafka's
      # words about a setting) is raised again with kafka's secrets scrubbed,
      # and without the original as its cause: Ruby would attach it, and
      # full_message and an uncaught error's report print a cause's message.
      # @param kafka [Hash] librdkafka properties
      def scrubbing(kafka)
        yield
      rescue Errors::ConfigurationInvalidError => e
        scrubbed = scrub(e.message, kafka)
        raise if scrubbed == e.message

        raise e.class, scrubbed, e.backtrace, cause: nil
      end
    end
  end
end
