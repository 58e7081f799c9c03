# frozen_string_literal: true

module Sluice
  # Built-in OAUTHBEARER token providers (listeners answering
  # oauthbearer.token_refresh): Amazon MSK's IAM authentication, and OAuth
  # client credentials (OIDC). Loaded when first used (they need net/http
  # and openssl).
  module Auth
    # A token provider could make no token: no credentials, an endpoint that
    # refused or did not answer (the message says which, and why).
    Error = Class.new(Errors::BaseError)

    autoload :Http, File.expand_path("auth/http", __dir__)
    autoload :OauthClientCredentials, File.expand_path("auth/oauth_client_credentials", __dir__)
    autoload :TokenProvider, File.expand_path("auth/token_provider", __dir__)
    autoload :AwsSigV4, File.expand_path("auth/aws_sig_v4", __dir__)
    autoload :AwsCredentials, File.expand_path("auth/aws_credentials", __dir__)
    autoload :AwsMskIam, File.expand_path("auth/aws_msk_iam", __dir__)
  end
end
