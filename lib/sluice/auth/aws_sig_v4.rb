# frozen_string_literal: true

require "openssl"
require "uri"

module Sluice
  module Auth
    # AWS Signature Version 4 for a presigned GET URL (query-string
    # authentication, as botocore's SigV4QueryAuth signs it): what an MSK IAM
    # token is made of. The only signed header is host, and the payload's
    # hash is the empty body's (botocore signs payloads over https unless an
    # operation turns it off; S3's presigning uses UNSIGNED-PAYLOAD instead).
    module AwsSigV4
      # The signature's algorithm.
      ALGORITHM = "AWS4-HMAC-SHA256"
      # SHA-256 of the empty body of a GET.
      EMPTY_PAYLOAD = OpenSSL::Digest.hexdigest("SHA256", "")

      module_function

      # @param host [String] e.g. "kafka.us-east-1.amazonaws.com"
      # @param region [String]
      # @param service [String] the signing name, e.g. "kafka-cluster"
      # @param params [Array<Array(String, String)>] the request's own query parameters, in URL order
      # @param credentials [AwsCredentials::Credentials]
      # @param time [Time] the signing time (UTC)
      # @param expires [Integer] seconds the URL stays valid
      # @return [Array<Array(String, String)>] every query parameter of the signed URL, in botocore's order:
      #   the request's own, then X-Amz-Algorithm, -Credential, -Date, -Expires, -SignedHeaders,
      #   -Security-Token (temporary credentials), -Signature
      def presign(host:, region:, service:, params:, credentials:, time:, expires:)
        amz_date = time.utc.strftime("%Y%m%dT%H%M%SZ")
        scope = "#{amz_date[0, 8]}/#{region}/#{service}/aws4_request"
        auth = [["X-Amz-Algorithm", ALGORITHM], ["X-Amz-Credential", "#{credentials.access_key_id}/#{scope}"],
                ["X-Amz-Date", amz_date], ["X-Amz-Expires", expires.to_s], %w[X-Amz-SignedHeaders host]]
        auth << ["X-Amz-Security-Token", credentials.session_token] if credentials.session_token
        query = params + auth
        canonical = ["GET", "/", canonical_query(query), "host:#{host}\n", "host", EMPTY_PAYLOAD].join("\n")
        to_sign = [ALGORITHM, amz_date, scope, OpenSSL::Digest.hexdigest("SHA256", canonical)].join("\n")
        query + [["X-Amz-Signature", OpenSSL::HMAC.hexdigest("SHA256", signing_key(credentials.secret_access_key, scope), to_sign)]]
      end

      # RFC 3986 percent-encoding: only A-Z a-z 0-9 - _ . ~ stay as they are.
      # @param text [String]
      # @return [String]
      def escape(text) = text.to_s.b.gsub(/[^A-Za-z0-9\-_.~]/n) { |byte| format("%%%02X", byte.ord) }

      # @param pairs [Array<Array(String, String)>]
      # @return [String] key=value pairs, escaped, joined with &
      def query_string(pairs) = pairs.map { |key, value| "#{escape(key)}=#{escape(value)}" }.join("&")

      # @param pairs [Array<Array(String, String)>]
      # @return [String] the canonical query string: the pairs sorted, escaped
      def canonical_query(pairs) = query_string(pairs.sort)

      # @param secret [String] the secret access key
      # @param scope [String] date/region/service/aws4_request
      # @return [String] the derived signing key (binary)
      def signing_key(secret, scope)
        scope.split("/").reduce("AWS4#{secret}") { |key, part| OpenSSL::HMAC.digest("SHA256", key, part) }
      end
    end
  end
end
