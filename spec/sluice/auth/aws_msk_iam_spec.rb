# frozen_string_literal: true

require "open3"

# MSK IAM tokens (issue 41): sluice's must be AWS's, byte for byte. AWS's own
# signer (aws-msk-iam-sasl-signer-python on botocore, installed by bin/setup
# into tmp/aws-signer) signs with the same credentials, clock and user agent
# (spec/support/aws/msk_signer.py), and the two tokens and expiries are compared.
RSpec.describe Sluice::Auth::AwsMskIam do
  python = File.expand_path("../../../tmp/aws-signer/bin/python", __dir__)
  signer = File.expand_path("../../support/aws/msk_signer.py", __dir__)
  define_method(:aws_token) do |region, credentials, time|
    out, status = Open3.capture2e(python, signer, region, credentials.access_key_id, credentials.secret_access_key,
                                  credentials.session_token || "-", time.utc.strftime("%Y%m%dT%H%M%SZ"), described_class::USER_AGENT)
    raise "AWS's signer failed: #{out}" unless status.success?

    value, expiry = out.lines.map(&:strip)
    [value, Integer(expiry)]
  end

  credentials = Sluice::Auth::AwsCredentials::Credentials
  # Fixed credentials: something answering #credentials.
  def fixed(credentials) = Struct.new(:credentials).new(credentials)

  def provider(region, credentials, time) = described_class.new(region: region, credentials: fixed(credentials), clock: -> { time })

  cases = {
    "long-term keys" => ["us-east-1", credentials.new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"), Time.utc(2026, 11, 27, 12)],
    "temporary keys with a session token needing escapes" =>
      ["eu-west-1", credentials.new("ASIAEXAMPLE", "se/cr+et=", "FwoG+ZXIv/Y=="), Time.utc(2026, 1, 2, 3, 4, 5)],
    "another region, a leap day" => ["ap-southeast-2", credentials.new("AKIA2", "k" * 40, nil), Time.utc(2028, 2, 29, 23, 59, 59)]
  }
  define_method(:keys) { |*args| credentials.new(*args) }
  cases.each do |name, (region, keys, time)|
    it "makes the token AWS's signer makes, byte for byte: #{name}",
       skip: (!File.executable?(python) && "AWS's signer is not installed in tmp/aws-signer (bin/setup installs it)") do
      token = provider(region, keys, time).token
      expect([token.value, token.expires_at_ms]).to eq(aws_token(region, keys, time))
      expect(token.expires_at_ms).to eq((time.to_i + 900) * 1000)
    end
  end

  it "signs a presigned URL of kafka-cluster:Connect on the region's endpoint, with sluice's user agent" do
    token = provider("us-east-1", keys("AKIDEXAMPLE", "secret"), Time.utc(2026, 11, 27, 12)).token
    url = Base64.urlsafe_decode64(token.value + ("=" * (-token.value.size % 4)))
    expect(url).to start_with("https://kafka.us-east-1.amazonaws.com/?Action=kafka-cluster%3AConnect&X-Amz-Algorithm=AWS4-HMAC-SHA256&")
    expect(url).to include("X-Amz-Credential=AKIDEXAMPLE%2F20261127%2Fus-east-1%2Fkafka-cluster%2Faws4_request", "X-Amz-Expires=900")
    expect(url).to end_with("&User-Agent=sluice%2F#{Sluice::VERSION}")
    expect(token.value).not_to include("=", "+", "/")
    expect(token.principal).to eq("aws-msk-iam")
  end

  it "refuses a region that is no region's name, and never shows credentials in its inspect" do
    expect { described_class.new(region: "us east") }.to raise_error(ArgumentError, /AWS region's name/)
    expect(provider("us-east-1", keys("AKIDEXAMPLE", "s3cret"), Time.now).inspect).to eq('#<Sluice::Auth::AwsMskIam region="us-east-1">')
  end

  # The listener: a client with SASL/OAUTHBEARER asks for a token inside new;
  # librdkafka takes the provider's (its answer is what the provider returns).
  it "answers a client's token refresh with a token librdkafka takes, and a failure when there are no credentials" do
    answers = Queue.new
    monitor = Sluice::Monitor.new(logger: Logger.new(nil))
    aws = provider("us-east-1", keys("AKIDEXAMPLE", "secret"), Time.now)
    monitor.subscribe("oauthbearer.token_refresh") { |event| answers << aws.on_oauthbearer_token_refresh(event) }
    producer = Sluice::Producer.new do |config|
      config.kafka = { "bootstrap.servers": "127.0.0.1:1", "security.protocol": "sasl_plaintext", "sasl.mechanism": "OAUTHBEARER" }
      config.monitor = monitor
      config.logger = Logger.new(nil)
    end
    expect(answers.pop).to be_a(Sluice::Auth::TokenProvider::Token)

    failing = Struct.new(:credentials).new(nil)
    def failing.credentials = raise(Sluice::Auth::AwsCredentials::Error, "no AWS credentials found: ...")
    bearer = Object.new
    told = []
    bearer.define_singleton_method(:oauthbearer_set_token_failure) { |reason| told << reason }
    answer = described_class.new(region: "us-east-1", credentials: failing).on_oauthbearer_token_refresh({ bearer: bearer })
    expect(answer).to be_a(Sluice::Auth::AwsCredentials::Error)
    expect(told).to eq(["Sluice::Auth::AwsMskIam: no AWS credentials found: ..."])
  ensure
    producer&.close
  end
end
