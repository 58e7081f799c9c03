# frozen_string_literal: true

require "base64"

module Sluice
  module Auth
    # Amazon MSK's IAM authentication over SASL/OAUTHBEARER, built in: the
    # token is a presigned URL of the kafka-cluster:Connect action (AWS
    # Signature Version 4, 15 minutes), base64url without padding, as AWS's
    # signer libraries make it (aws-msk-iam-sasl-signer-python: the same
    # token byte for byte with the same credentials, clock and user agent;
    # spec/sluice/auth/aws_msk_iam_spec.rb compares them). Credentials come
    # from AwsCredentials' chain, or from an object of yours.
    #
    # A listener (TokenProvider): subscribe it to the monitor of the clients
    # it serves, before they are built. librdkafka asks for a new token at 80%
    # of its lifetime (12 minutes).
    #
    # @example A producer on MSK with IAM (port 9098)
    #   monitor = Sluice::Monitor.new
    #   monitor.subscribe(Sluice::Auth::AwsMskIam.new(region: "eu-west-1"))
    #   producer = Sluice::Producer.new do |config|
    #     config.kafka = { "bootstrap.servers": "b-1.mycluster.abc123.c2.kafka.eu-west-1.amazonaws.com:9098",
    #                      "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER" }
    #     config.monitor = monitor
    #   end
    class AwsMskIam
      include TokenProvider

      # The signed action.
      ACTION = "kafka-cluster:Connect"
      # The signing name of MSK's data plane.
      SERVICE = "kafka-cluster"
      # How long a token stays valid (s), as AWS's signers make it.
      EXPIRES = 900
      # What the token says made it (AWS's signers put their own name and version).
      USER_AGENT = "sluice/#{VERSION}".freeze
      # The principal librdkafka is told (the broker takes the identity from the signature).
      PRINCIPAL = "aws-msk-iam"

      # @param region [String] the cluster's region, e.g. "us-east-1"
      # @param credentials [#credentials, nil] something answering #credentials with an
      #   AwsCredentials::Credentials; nil: AwsCredentials' default chain
      # @param clock [#call] the time now, a Time
      # @param user_agent [String]
      # @raise [ArgumentError] region is not a region's name
      def initialize(region:, credentials: nil, clock: -> { Time.now }, user_agent: USER_AGENT)
        unless region.to_s.match?(/\A[a-z0-9-]+\z/)
          raise ArgumentError, "region must be an AWS region's name, such as \"us-east-1\", got #{region.inspect}"
        end

        @region = region.to_s
        @credentials = credentials || AwsCredentials.new(region: @region, clock: clock)
        @clock = clock
        @user_agent = user_agent
      end

      # A token signed now.
      # @return [TokenProvider::Token]
      # @raise [AwsCredentials::Error] no credentials, or their source failed
      def token
        time = @clock.call.utc
        host = "kafka.#{@region}.amazonaws.com"
        params = AwsSigV4.presign(host: host, region: @region, service: SERVICE, params: [["Action", ACTION]],
                                  credentials: @credentials.credentials, time: time, expires: EXPIRES)
        url = "https://#{host}/?#{AwsSigV4.query_string(params + [["User-Agent", @user_agent]])}"
        Token.new(Base64.urlsafe_encode64(url, padding: false), (time.to_i + EXPIRES) * 1000, PRINCIPAL, {})
      end

      # @return [String] the region only: credentials are never shown
      def inspect = "#<#{self.class.name} region=#{@region.inspect}>"
    end
  end
end
