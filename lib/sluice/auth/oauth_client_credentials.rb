# frozen_string_literal: true

require "base64"
require "ipaddr"
require "json"
require "uri"

module Sluice
  module Auth
    # OAuth 2.0 client credentials (what librdkafka's
    # sasl.oauthbearer.method=oidc does, without libcurl): a token from the
    # identity provider's token endpoint for a client id and secret (HTTP
    # Basic, RFC 6749 4.4), with a scope and SASL extensions if given. Its
    # lifetime and principal come from the JWT's exp and sub claims (else
    # expires_in and the client id). What Confluent Cloud, Azure Event Hubs,
    # Keycloak and Okta users configure.
    #
    # A listener (TokenProvider): subscribe it to the monitor of the clients
    # it serves, before they are built. librdkafka asks again at 80% of the
    # token's lifetime; a failure (a refused secret, an endpoint down) is told
    # to librdkafka, and the client's reads raise AuthenticationError with it.
    #
    # @example
    #   monitor = Sluice::Monitor.new
    #   monitor.subscribe(Sluice::Auth::OauthClientCredentials.new(
    #     token_endpoint_url: "https://idp.example.com/oauth2/token", client_id: "billing", client_secret: ENV.fetch("CLIENT_SECRET"),
    #     scope: "kafka", extensions: { logicalCluster: "lkc-abc12", identityPoolId: "pool-xyz" }))
    #   consumer = Sluice::Consumer.new do |config|
    #     config.kafka = { "bootstrap.servers": "...", "group.id": "billing", "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER" }
    #     config.monitor = monitor
    #   end
    class OauthClientCredentials
      include TokenProvider

      # Seconds to connect to the token endpoint and wait for its answer.
      TIMEOUT = 10

      # @param token_endpoint_url [String] the identity provider's token endpoint: https, or http on
      #   loopback (localhost, 127.0.0.0/8, ::1) only, as the client secret goes in its request
      # @param client_id [String]
      # @param client_secret [String]
      # @param scope [String, nil] the scope asked for
      # @param extensions [Hash{#to_s => #to_s}] SASL extensions sent with the token (Confluent Cloud's logicalCluster, ...)
      # @param ca_file [String, nil] CA certificates to verify the endpoint with (default: the system's)
      # @param timeout [Numeric] seconds (see TIMEOUT)
      # @param clock [#call] the time now, a Time
      # @raise [ArgumentError] a URL that is not http(s) or holds credentials, an empty client id or secret
      # @raise [Errors::InsecureEndpointError] an http URL whose host is not loopback
      def initialize(token_endpoint_url:, client_id:, client_secret:, scope: nil, extensions: {}, ca_file: nil, timeout: TIMEOUT,
                     clock: -> { Time.now })
        raise ArgumentError, "client_id and client_secret must be non-empty Strings" if [client_id, client_secret].any? { |v| v.to_s.empty? }

        @url = checked_url(token_endpoint_url.to_s)
        @client_id = client_id.to_s
        @client_secret = client_secret.to_s
        @scope = scope
        @extensions = extensions.to_h { |key, value| [key.to_s, value.to_s] }
        @ca_file = ca_file
        @timeout = timeout
        @clock = clock
      end

      # A token fetched now.
      # @return [TokenProvider::Token]
      # @raise [Auth::Error] the endpoint refused (a wrong secret: its error), did not answer, or gave no usable token
      def token
        form = { "grant_type" => "client_credentials" }
        form["scope"] = @scope if @scope
        basic = Base64.strict_encode64("#{escape(@client_id)}:#{escape(@client_secret)}")
        body = Http.request(:post, @url, timeout: @timeout, what: "the token endpoint #{@url}", form: form, ca_file: @ca_file,
                                         headers: { "Authorization" => "Basic #{basic}", "Accept" => "application/json" })
        parse(body)
      end

      # @return [String] the endpoint and client id: never the secret
      def inspect = "#<#{self.class.name} #{@url} client_id=#{@client_id.inspect}>"

      private

      # The URL is named in every error message, so it may hold no
      # credentials; the secret may travel in clear only on this machine.
      def checked_url(url)
        uri = URI.parse(url) if url.match?(%r{\Ahttps?://}i)
        raise ArgumentError, "token_endpoint_url must be an http(s) URL" unless uri&.host
        raise ArgumentError, "token_endpoint_url must hold no credentials: give client_id and client_secret" if uri.userinfo
        return url if uri.scheme.casecmp?("https") || loopback?(uri.hostname)

        raise Errors::InsecureEndpointError,
              "token_endpoint_url must be https (http only on loopback: the client secret would travel in clear), got http://#{uri.host}"
      rescue URI::InvalidURIError
        raise ArgumentError, "token_endpoint_url is not a URL", cause: nil # URI's message quotes it
      end

      def loopback?(host)
        host.casecmp?("localhost") || IPAddr.new(host).loopback?
      rescue IPAddr::InvalidAddressError # a name: only localhost is loopback by definition
        false
      end

      # RFC 6749 2.3.1: id and secret form-encoded before Basic.
      def escape(text) = URI.encode_www_form_component(text)

      def parse(body)
        answer = JSON.parse(body)
        value = answer["access_token"]
        raise Error, "the token endpoint #{@url} answered without an access_token: #{answer.keys.join(", ")}" if value.to_s.empty?

        claims = jwt_claims(value)
        expires_at = claims["exp"] ? Integer(claims["exp"]) : @clock.call.to_i + Integer(answer.fetch("expires_in", 3600))
        raise Error, "the token endpoint #{@url} gave a token that expired at #{Time.at(expires_at).utc}" if expires_at <= @clock.call.to_i

        Token.new(value, expires_at * 1000, claims["sub"] || @client_id, @extensions)
      rescue JSON::ParserError # neither its words nor the parser's (the cause): a form-encoded answer holds the token
        raise Error, "the token endpoint #{@url} answered something that is not JSON (#{body.bytesize} bytes)", cause: nil
      end

      # The claims of a JWT (not verified: the broker does that), or {} for an opaque token.
      def jwt_claims(token)
        payload = token.split(".")[1]
        return {} unless payload

        JSON.parse(Base64.urlsafe_decode64(payload + ("=" * (-payload.size % 4))))
      rescue ArgumentError, JSON::ParserError
        {}
      end
    end
  end
end
