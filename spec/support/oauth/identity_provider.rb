# frozen_string_literal: true

require "base64"
require "json"
require "openssl"
require "webrick"

# An OAuth identity provider on loopback for spec/integration/oauth/client_credentials_spec.rb:
# a token endpoint issuing RS256 JWTs for one client (client credentials, HTTP Basic), and the
# JWKS with the public key, which the spec's broker validates tokens against.
class IdentityProvider
  CLIENT = "sluice-app"
  SECRET = "right-secret"

  attr_reader :url
  attr_accessor :lifetime # s a token is issued for (negative: already expired)

  def initialize
    @key = OpenSSL::PKey::RSA.new(2048)
    @lifetime = 3600
    @server = WEBrick::HTTPServer.new(BindAddress: "127.0.0.1", Port: 0, Logger: WEBrick::Log.new(File::NULL), AccessLog: [])
    @server.mount_proc("/jwks") { |_, response| response.body = JSON.generate(keys: [jwk]) }
    @server.mount_proc("/token") { |request, response| response.status, response.body = issue(request) }
    @url = "http://127.0.0.1:#{@server.config[:Port]}"
    Thread.new { @server.start }
  end

  def shutdown = @server.shutdown

  # A token like the ones issued, signed with another key (the JWKS lacks it).
  def forged(subject) = jwt({ sub: subject, aud: "kafka", iat: Time.now.to_i, exp: Time.now.to_i + 3600 }, OpenSSL::PKey::RSA.new(2048))

  private

  def issue(request)
    id, secret = Base64.decode64(request["Authorization"].to_s.delete_prefix("Basic ")).split(":", 2)
    return [401, JSON.generate(error: "invalid_client")] unless id == CLIENT && secret == SECRET
    return [400, JSON.generate(error: "unsupported_grant_type")] unless request.query["grant_type"] == "client_credentials"

    now = Time.now.to_i
    [200, JSON.generate(access_token: jwt({ sub: CLIENT, aud: "kafka", iss: @url, scope: request.query["scope"], iat: now - 60,
                                            exp: now + @lifetime }, @key), token_type: "Bearer", expires_in: @lifetime)]
  end

  def jwt(claims, key)
    signing = [{ alg: "RS256", typ: "JWT", kid: "k1" }, claims].map { |part| b64(JSON.generate(part)) }.join(".")
    "#{signing}.#{b64(key.sign(OpenSSL::Digest.new("SHA256"), signing))}"
  end

  def jwk = { kty: "RSA", kid: "k1", use: "sig", alg: "RS256", n: b64(@key.n.to_s(2)), e: b64(@key.e.to_s(2)) }

  def b64(bytes) = Base64.urlsafe_encode64(bytes, padding: false)
end
