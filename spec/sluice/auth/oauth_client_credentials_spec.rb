# frozen_string_literal: true

require "webrick"
require_relative "../../support/oauth/identity_provider"

# OAuth client credentials without a broker (issue 53, item 6): a token from
# a token endpoint on loopback with nothing loaded but sluice, and the client
# secret never sent in clear off this machine nor shown in an error.
RSpec.describe Sluice::Auth::OauthClientCredentials do
  secret = "s3cret-client-secret"

  def provider(url, secret) = described_class.new(token_endpoint_url: url, client_id: IdentityProvider::CLIENT, client_secret: secret)

  def leaks(error, secret) = [error.message, error.full_message].select { |text| text.include?(secret) }

  it "fetches a token in a process that loads sluice and nothing else" do
    idp = IdentityProvider.new
    code = <<~RUBY
      token = Sluice::Auth::OauthClientCredentials.new(token_endpoint_url: ARGV.fetch(0), client_id: #{IdentityProvider::CLIENT.inspect},
                                                       client_secret: #{IdentityProvider::SECRET.inspect}).token
      puts "principal=\#{token.principal} expires_in=\#{(token.expires_at_ms / 1000) - Time.now.to_i}"
    RUBY
    # No RUBYOPT: the spec process's own -r (the group protocol's) must not load anything for it.
    out, status = run_scenario_process([RbConfig.ruby, "-I", File.expand_path("../../../lib", __dir__), "-rsluice", "-e", code, "#{idp.url}/token"],
                                       timeout: 30, env: { "RUBYOPT" => nil })
    expect(status).to be_success, out
    expect(out).to match(/\Aprincipal=#{IdentityProvider::CLIENT} expires_in=3[56]\d\d\n\z/)
  ensure
    idp&.shutdown
  end

  it "refuses plain http off loopback when built, by name, without the secret (https anywhere, http on loopback taken)" do
    expect { provider("http://idp.example.com/oauth2/token", secret) }.to raise_error(Sluice::Errors::InsecureEndpointError) { |error|
      expect(error).to be_a(Sluice::Errors::ConfigurationInvalidError)
      expect(error.message).to include("https", "http://idp.example.com")
      expect(leaks(error, secret)).to eq([])
    }
    taken = %w[https://idp.example.com/token http://127.0.0.1:8080/token http://127.3.2.1/token http://[::1]:8080/token http://localhost/token
               HTTP://LOCALHOST/token]
    expect(taken.map { |url| provider(url, secret).inspect }).to all(include("client_id=", "/token"))
  end

  it "refuses a URL holding credentials or not http(s) without quoting it" do
    ["http://#{IdentityProvider::CLIENT}:#{secret}@127.0.0.1/token", "ftp://127.0.0.1/#{secret}", "http://in valid/#{secret}", secret].each do |url|
      expect { provider(url, "other") }.to raise_error(ArgumentError) { |error| expect(leaks(error, secret)).to eq([]) }
    end
  end

  # A form-encoded answer (what some providers give without Accept: application/json) holds the token.
  it "names an answer that is not JSON without quoting it" do
    token = "s3cret-access-token"
    server = WEBrick::HTTPServer.new(BindAddress: "127.0.0.1", Port: 0, Logger: WEBrick::Log.new(File::NULL), AccessLog: [])
    server.mount_proc("/token") { |_, response| response.body = "access_token=#{token}&token_type=bearer" }
    Thread.new { server.start }
    expect { provider("http://127.0.0.1:#{server.config[:Port]}/token", secret).token }.to raise_error(Sluice::Auth::Error, /not JSON/) { |error|
      expect(error.cause).to be_nil
      expect(leaks(error, token)).to eq([])
    }
  ensure
    server&.shutdown
  end
end
