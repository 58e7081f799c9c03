# frozen_string_literal: true

module Sluice
  # The librdkafka properties whose values are secrets, and the printable
  # forms of what holds them: a config's inspect, an error message built
  # from a setting. Whatever the key's spelling (Symbol or String), a value
  # of a sensitive property is shown as FILTERED.
  module Secrets
    # What a secret is shown as.
    FILTERED = "[FILTERED]"
    # Any *.password, *.secret or *passphrase (sasl.password, ssl.key.password,
    # sasl.oauthbearer.client.secret, ...), the PEM of a private key, every
    # keystore setting, and sasl.oauthbearer.config (an unsecured token's claims).
    SENSITIVE = /password|secret|passphrase|\Assl\.key\.pem\z|\Assl\.keystore\.|\Asasl\.oauthbearer\.config\z|private\.key/i

    module_function

    # @param name [String, Symbol] a librdkafka property
    # @return [Boolean] its value is a secret
    def sensitive?(name) = SENSITIVE.match?(name.to_s)

    # @param kafka [Hash] librdkafka properties
    # @return [Hash] the same, each secret value replaced by FILTERED
    def filter(kafka) = kafka.to_h { |name, value| [name, sensitive?(name) ? FILTERED : value] }

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
    # words about a setting) is raised again with kafka's secrets scrubbed.
    # @param kafka [Hash] librdkafka properties
    def scrubbing(kafka)
      yield
    rescue Errors::ConfigurationInvalidError => e
      scrubbed = scrub(e.message, kafka)
      raise if scrubbed == e.message

      raise e.class, scrubbed, e.backtrace
    end
  end
end
