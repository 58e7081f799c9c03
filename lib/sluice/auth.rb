# frozen_string_literal: true

module Sluice
  # Built-in OAUTHBEARER token providers (listeners answering
  # oauthbearer.token_refresh): Amazon MSK's IAM authentication. Loaded when
  # first used (they need net/http and openssl).
  module Auth
    autoload :TokenProvider, File.expand_path("auth/token_provider", __dir__)
    autoload :AwsSigV4, File.expand_path("auth/aws_sig_v4", __dir__)
    autoload :AwsCredentials, File.expand_path("auth/aws_credentials", __dir__)
    autoload :AwsMskIam, File.expand_path("auth/aws_msk_iam", __dir__)
  end
end
