# frozen_string_literal: true

require "json"
require "socket"
require "tmpdir"
require "webrick"

# The AWS credential chain (issue 41), each source against what it reads:
# files and an environment of the spec's own, and loopback HTTP servers
# standing in for STS, the ECS container endpoint and EC2's instance
# metadata (IMDSv2's token flow included). Failures are named, and a server
# that never answers ends in an error within the source's timeout, not a hang.
RSpec.describe Sluice::Auth::AwsCredentials do
  let(:home) { Dir.mktmpdir("sluice-aws") }
  # Nothing of the machine's: no home files, instance metadata on a closed port.
  let(:base_env) do
    { "AWS_SHARED_CREDENTIALS_FILE" => File.join(home, "credentials"), "AWS_CONFIG_FILE" => File.join(home, "config"),
      "AWS_EC2_METADATA_SERVICE_ENDPOINT" => "http://127.0.0.1:#{closed_port}" }
  end
  let(:later) { Time.utc(2026, 11, 27, 18) }
  let(:noon) { Time.utc(2026, 11, 27, 12) }

  after do
    @servers&.each(&:shutdown)
    FileUtils.rm_rf(home)
  end

  def closed_port = TCPServer.open("127.0.0.1", 0).then { |server| server.addr[1].tap { server.close } }

  def chain(env, clock: -> { noon }) = described_class.new(region: "us-east-1", env: base_env.merge(env), clock: clock)

  # A loopback HTTP server answering with the block (request => [status, body]); its requests are logged.
  def serve(&answer)
    log = []
    server = WEBrick::HTTPServer.new(BindAddress: "127.0.0.1", Port: 0, Logger: WEBrick::Log.new(File::NULL), AccessLog: [])
    server.mount_proc("/") do |request, response|
      log << [request.request_method, request.path, request.header.transform_values(&:first), request.body]
      response.status, response.body = answer.call(request)
    end
    (@servers ||= []) << server
    Thread.new { server.start }
    ["http://127.0.0.1:#{server.config[:Port]}", log]
  end

  def json(expiration) = JSON.generate("Code" => "Success", "AccessKeyId" => "ASIATEMP", "SecretAccessKey" => "temp-secret",
                                       "Token" => "temp-token", "Expiration" => expiration.iso8601)

  it "takes the environment's keys first" do
    found = chain({ "AWS_ACCESS_KEY_ID" => "AKIAENV", "AWS_SECRET_ACCESS_KEY" => "env-secret", "AWS_SESSION_TOKEN" => "env-token" }).credentials
    expect(found.to_h.slice(:access_key_id, :secret_access_key, :session_token, :source))
      .to eq(access_key_id: "AKIAENV", secret_access_key: "env-secret", session_token: "env-token", source: "the environment")
  end

  it "reads the profile's keys from the shared credentials file, then from the config file's [profile NAME]" do
    File.write(File.join(home, "credentials"), "[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = d-secret\n")
    File.write(File.join(home, "config"), "# mine\n[profile ops]\nregion = eu-west-1\naws_access_key_id=AKIAOPS\naws_secret_access_key=o-secret\n")
    expect(chain({}).credentials.access_key_id).to eq("AKIADEFAULT")
    ops = chain({ "AWS_PROFILE" => "ops" }).credentials
    expect([ops.access_key_id, ops.secret_access_key, ops.source]).to eq(["AKIAOPS", "o-secret", "#{home}/config [profile ops]"])
  end

  it "exchanges a web identity token at STS (AssumeRoleWithWebIdentity) and keeps the credentials until 5 minutes before they expire" do
    url, log = serve do
      [200, "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIAWEB</AccessKeyId>" \
            "<SecretAccessKey>web-secret</SecretAccessKey><SessionToken>web-token</SessionToken><Expiration>#{later.iso8601}</Expiration>" \
            "</Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>"]
    end
    File.write(File.join(home, "token"), "eyJ.web.identity\n")
    clock = noon
    aws = chain({ "AWS_WEB_IDENTITY_TOKEN_FILE" => File.join(home, "token"), "AWS_ROLE_ARN" => "arn:aws:iam::1:role/app",
                  "AWS_ROLE_SESSION_NAME" => "app-1", "AWS_ENDPOINT_URL_STS" => url }, clock: -> { clock })
    found = aws.credentials
    expect(found.to_h.slice(:access_key_id, :session_token, :expires_at))
      .to eq(access_key_id: "ASIAWEB", session_token: "web-token", expires_at: later)
    form = URI.decode_www_form(log.first.last).to_h
    expect(form).to include("Action" => "AssumeRoleWithWebIdentity", "RoleArn" => "arn:aws:iam::1:role/app", "RoleSessionName" => "app-1",
                            "WebIdentityToken" => "eyJ.web.identity")
    clock = later - 301
    aws.credentials
    expect(log.size).to eq(1) # kept
    clock = later - 299
    aws.credentials
    expect(log.size).to eq(2) # within five minutes of expiring: asked again
  end

  it "names STS throttling, and credentials a source gives already expired" do
    url, = serve { [400, "<ErrorResponse><Error><Code>Throttling</Code><Message>Rate exceeded</Message></Error></ErrorResponse>"] }
    File.write(File.join(home, "token"), "t")
    web = { "AWS_WEB_IDENTITY_TOKEN_FILE" => File.join(home, "token"), "AWS_ROLE_ARN" => "arn:aws:iam::1:role/app", "AWS_ENDPOINT_URL_STS" => url }
    expect { chain(web).credentials }.to raise_error(described_class::Error, /STS AssumeRoleWithWebIdentity answered HTTP 400 \(throttled\)/)

    ecs, = serve { [200, json(noon - 60)] }
    expect { chain({ "AWS_CONTAINER_CREDENTIALS_FULL_URI" => "#{ecs}/creds" }).credentials }
      .to raise_error(described_class::Error, /from the container credentials endpoint expired at 2026-11-27T11:59:00Z/)
  end

  it "asks the ECS container endpoint, with its authorization token" do
    url, log = serve { |request| request["Authorization"] == "ecs-auth" ? [200, json(later)] : [401, "no"] }
    env = { "AWS_CONTAINER_CREDENTIALS_FULL_URI" => "#{url}/v2/credentials/abc", "AWS_CONTAINER_AUTHORIZATION_TOKEN" => "ecs-auth" }
    found = chain(env).credentials
    expect([found.access_key_id, found.session_token, found.expires_at]).to eq(["ASIATEMP", "temp-token", later])
    expect(log.map { |method, path, _| [method, path] }).to eq([["GET", "/v2/credentials/abc"]])
  end

  it "names an answer cut short without quoting it: it may hold the secret key (issue 53)" do
    url, = serve { [200, json(later)[0, 80]] }
    env = { "AWS_CONTAINER_CREDENTIALS_FULL_URI" => "#{url}/v2/credentials/abc" }
    expect { chain(env).credentials }.to raise_error(described_class::Error, /container credentials .*not JSON/) { |error|
      expect(error.cause).to be_nil
      expect([error.message, error.full_message].select { |text| text.include?("temp-s") }).to eq([])
    }
  end

  it "asks EC2's instance metadata with an IMDSv2 session token, for the instance's role" do
    url, log = serve do |request|
      next [200, "imds-session"] if request.request_method == "PUT" && request.path == "/latest/api/token"
      next [401, ""] unless request["X-aws-ec2-metadata-token"] == "imds-session"

      request.path.end_with?("/security-credentials/") ? [200, "app-role\n"] : [200, json(later)]
    end
    found = chain({ "AWS_EC2_METADATA_SERVICE_ENDPOINT" => url }).credentials
    expect([found.access_key_id, found.source]).to eq(["ASIATEMP", "instance metadata (IMDSv2) at #{url}"])
    expect(log.map { |method, path, headers| [method, path, headers["x-aws-ec2-metadata-token-ttl-seconds"]] })
      .to eq([["PUT", "/latest/api/token", "21600"], ["GET", "/latest/meta-data/iam/security-credentials/", nil],
              ["GET", "/latest/meta-data/iam/security-credentials/app-role", nil]])
  end

  it "says what every source said when none has credentials" do
    expect { chain({}).credentials }.to raise_error(described_class::Error) { |error|
      expect(error.message).to start_with("no AWS credentials found: environment: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY not both set")
      expect(error.message).to include("web identity:", "shared files: no keys for profile default", "container:",
                                       "instance metadata: instance metadata (IMDSv2) at http://127.0.0.1:")
    }
    expect { chain({ "AWS_EC2_METADATA_DISABLED" => "true" }).credentials }.to raise_error(described_class::Error, /AWS_EC2_METADATA_DISABLED is set/)
  end

  it "ends a wait on an endpoint that accepts and never answers with an error naming it, not a hang" do
    silent = TCPServer.new("127.0.0.1", 0)
    held = []
    acceptor = Thread.new { loop { held << silent.accept } }
    expect { chain({ "AWS_EC2_METADATA_SERVICE_ENDPOINT" => "http://127.0.0.1:#{silent.addr[1]}" }).credentials }
      .to raise_error(described_class::Error, /instance metadata \(IMDSv2\) at .* did not answer within 1s/)
  ensure
    acceptor&.kill
    held&.each(&:close)
    silent&.close
  end
end
