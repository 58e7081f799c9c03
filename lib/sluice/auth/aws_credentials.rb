# frozen_string_literal: true

require "json"
require "time"
require "uri"

module Sluice
  module Auth
    # AWS credentials, found the way AWS's SDKs document their default chain,
    # first source with credentials wins:
    # 1. the environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN);
    # 2. web identity (EKS service accounts): AWS_WEB_IDENTITY_TOKEN_FILE and
    #    AWS_ROLE_ARN, exchanged at STS (AssumeRoleWithWebIdentity);
    # 3. the shared credentials file (AWS_SHARED_CREDENTIALS_FILE, ~/.aws/credentials),
    #    then the shared config file (AWS_CONFIG_FILE, ~/.aws/config), profile
    #    AWS_PROFILE or "default" (keys only: no role_arn, SSO or credential_process);
    # 4. ECS container credentials: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, or
    #    AWS_CONTAINER_CREDENTIALS_FULL_URI with AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE);
    # 5. EC2 instance metadata, IMDSv2 (session token first), unless AWS_EC2_METADATA_DISABLED.
    #
    # Temporary credentials are kept until five minutes before they expire.
    # Every network source has short timeouts: a source that fails or is not
    # there says so in the error, never hangs.
    class AwsCredentials
      # What signs a request. expires_at: nil for long-term keys.
      Credentials = Struct.new(:access_key_id, :secret_access_key, :session_token, :expires_at, :source)

      # Raised when no source has credentials, or one that should failed (expired, throttled, refused):
      # the message says what each source said.
      Error = Auth::Error

      # Temporary credentials are fetched again this long (s) before they expire.
      REFRESH_AHEAD = 300
      # Seconds to connect to and wait for an endpoint: instance metadata is local, or absent.
      METADATA_TIMEOUT = 1
      # (see METADATA_TIMEOUT) STS and container endpoints.
      SERVICE_TIMEOUT = 5
      # The ECS agent's endpoint, which AWS_CONTAINER_CREDENTIALS_RELATIVE_URI is a path on.
      ECS_HOST = "http://169.254.170.2"
      # EC2's instance metadata service (AWS_EC2_METADATA_SERVICE_ENDPOINT names another).
      IMDS_ENDPOINT = "http://169.254.169.254"
      # How long (s) an IMDSv2 session token is asked to last.
      IMDS_TOKEN_TTL = "21600"
      # The STS API version AssumeRoleWithWebIdentity is asked in.
      STS_VERSION = "2011-06-15"

      # @param region [String] STS's region (web identity)
      # @param env [Hash] the environment (ENV by default)
      # @param clock [#call] the time now, a Time
      def initialize(region:, env: ENV, clock: -> { Time.now })
        @region = region
        @env = env
        @clock = clock
        @cached = nil
        @lock = Mutex.new
      end

      # @return [Credentials]
      # @raise [Error] none found, or a source failed
      def credentials
        @lock.synchronize do
          @cached = nil if @cached&.expires_at && @cached.expires_at - REFRESH_AHEAD <= @clock.call
          @cached ||= fetch
        end
      end

      private

      def fetch
        tried = []
        %i[environment web_identity shared_files container instance_metadata].each do |source|
          found = send(source)
          return checked(found) if found.is_a?(Credentials)

          tried << "#{source.to_s.tr("_", " ")}: #{found}"
        end
        raise Error, "no AWS credentials found: #{tried.join("; ")}"
      end

      def checked(found)
        return found unless found.expires_at && found.expires_at <= @clock.call

        raise Error, "AWS credentials from #{found.source} expired at #{found.expires_at.utc.iso8601}"
      end

      # Each source: Credentials, or why it has none (a String).

      def environment
        id = @env["AWS_ACCESS_KEY_ID"]
        secret = @env["AWS_SECRET_ACCESS_KEY"]
        return "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY not both set" if blank?(id) || blank?(secret)

        Credentials.new(id, secret, present(@env["AWS_SESSION_TOKEN"]), nil, "the environment")
      end

      def web_identity
        file = @env["AWS_WEB_IDENTITY_TOKEN_FILE"]
        role = @env["AWS_ROLE_ARN"]
        return "AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN not both set" if blank?(file) || blank?(role)

        token = File.read(file).strip
        params = { "Action" => "AssumeRoleWithWebIdentity", "Version" => STS_VERSION, "RoleArn" => role,
                   "RoleSessionName" => present(@env["AWS_ROLE_SESSION_NAME"]) || "sluice-#{Process.pid}", "WebIdentityToken" => token }
        body = request(:post, sts_endpoint, SERVICE_TIMEOUT, form: params, what: "STS AssumeRoleWithWebIdentity")
        sts_credentials(body)
      rescue SystemCallError => e
        raise Error, "web identity: cannot read AWS_WEB_IDENTITY_TOKEN_FILE #{file}: #{e.message}"
      end

      def shared_files
        profile = present(@env["AWS_PROFILE"]) || "default"
        credentials = @env["AWS_SHARED_CREDENTIALS_FILE"] || File.join(Dir.home, ".aws", "credentials")
        config = @env["AWS_CONFIG_FILE"] || File.join(Dir.home, ".aws", "config")
        [[credentials, profile], [config, profile == "default" ? "default" : "profile #{profile}"]].each do |path, section|
          keys = ini_section(path, section)
          next unless keys && !blank?(keys["aws_access_key_id"]) && !blank?(keys["aws_secret_access_key"])

          return Credentials.new(keys["aws_access_key_id"], keys["aws_secret_access_key"], present(keys["aws_session_token"]), nil,
                                 "#{path} [#{section}]")
        end
        "no keys for profile #{profile} in #{credentials} or #{config}"
      end

      def container
        relative = present(@env["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"])
        full = present(@env["AWS_CONTAINER_CREDENTIALS_FULL_URI"])
        return "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and _FULL_URI not set" unless relative || full

        url = relative ? "#{ECS_HOST}#{relative}" : full
        headers = {}
        authorization = container_authorization
        headers["Authorization"] = authorization if authorization
        json_credentials(request(:get, url, SERVICE_TIMEOUT, headers: headers, what: "the container credentials endpoint"),
                         "the container credentials endpoint")
      end

      def container_authorization
        file = present(@env["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"])
        file ? File.read(file).strip : present(@env["AWS_CONTAINER_AUTHORIZATION_TOKEN"])
      end

      def instance_metadata
        return "AWS_EC2_METADATA_DISABLED is set" if @env["AWS_EC2_METADATA_DISABLED"].to_s.casecmp?("true")

        base = (present(@env["AWS_EC2_METADATA_SERVICE_ENDPOINT"]) || IMDS_ENDPOINT).chomp("/")
        what = "instance metadata (IMDSv2) at #{base}"
        token = request(:put, "#{base}/latest/api/token", METADATA_TIMEOUT,
                        headers: { "X-aws-ec2-metadata-token-ttl-seconds" => IMDS_TOKEN_TTL }, what: what, absent_ok: true)
        headers = { "X-aws-ec2-metadata-token" => token }
        path = "#{base}/latest/meta-data/iam/security-credentials/"
        role = request(:get, path, METADATA_TIMEOUT, headers: headers, what: what).lines.first&.strip
        return "#{what}: the instance has no IAM role" if blank?(role)

        json_credentials(request(:get, "#{path}#{role}", METADATA_TIMEOUT, headers: headers, what: what), what)
      rescue Http::Unreachable => e
        e.message # no instance metadata here (not on EC2): the chain's end, not an error
      end

      def sts_endpoint = present(@env["AWS_ENDPOINT_URL_STS"]) || "https://sts.#{@region}.amazonaws.com/"

      def request(method, url, timeout, what:, headers: {}, form: nil, absent_ok: false)
        Http.request(method, url, timeout: timeout, what: what, headers: headers, form: form, absent_ok: absent_ok)
      end

      def sts_credentials(xml)
        fields = %w[AccessKeyId SecretAccessKey SessionToken Expiration].to_h { |name| [name, xml[%r{<#{name}>([^<]*)</#{name}>}, 1]] }
        raise Error, "STS answered without credentials: #{xml[0, 300]}" if fields.values_at("AccessKeyId", "SecretAccessKey").any?(&:nil?)

        Credentials.new(fields["AccessKeyId"], fields["SecretAccessKey"], fields["SessionToken"], time(fields["Expiration"]), "web identity (STS)")
      end

      def json_credentials(body, what)
        data = JSON.parse(body)
        raise Error, "#{what} answered #{data["Code"]}: #{data["Message"]}" if data["Code"] && data["Code"] != "Success"
        raise Error, "#{what} answered without credentials" if blank?(data["AccessKeyId"]) || blank?(data["SecretAccessKey"])

        Credentials.new(data["AccessKeyId"], data["SecretAccessKey"], present(data["Token"]), time(data["Expiration"]), what)
      rescue JSON::ParserError # neither its words nor the parser's (the cause): a cut answer holds the secret key
        raise Error, "#{what} answered something that is not JSON (#{body.bytesize} bytes)", cause: nil
      end

      def time(text) = text && Time.iso8601(text)

      # The keys of [section] in an INI file, or nil (no file, no section).
      def ini_section(path, section)
        return unless File.file?(path)

        current = nil
        keys = {}
        File.foreach(path) do |line|
          line = line.strip
          next if line.empty? || line.start_with?("#", ";")

          if (name = line[/\A\[\s*(.+?)\s*\]\z/, 1])
            current = name
          elsif current == section && (pair = line.match(/\A([^=]+?)\s*=\s*(.*)\z/))
            keys[pair[1]] = pair[2]
          end
        end
        keys.empty? ? nil : keys
      end

      def blank?(value) = value.nil? || value.to_s.strip.empty?

      def present(value) = blank?(value) ? nil : value
    end
  end
end
