# frozen_string_literal: true

require "net/http"
require "uri"

module Sluice
  module Auth
    # The token providers' HTTP: one request with short timeouts, its
    # failures named (by what was asked) as Auth::Error, never a hang.
    module Http
      # The endpoint is not there at all (refused, unreachable, timed out
      # connecting), for a source that may just not apply (EC2's metadata off EC2).
      Unreachable = Class.new(StandardError)

      # The request classes by method.
      METHODS = { get: Net::HTTP::Get, put: Net::HTTP::Put, post: Net::HTTP::Post }.freeze

      module_function

      # @param method [Symbol] :get, :put or :post
      # @param url [String]
      # @param timeout [Numeric] seconds to connect, and to wait for each read and write
      # @param what [String] what is asked, for the error messages
      # @param headers [Hash{String => String}]
      # @param form [Hash{String => String}, nil] a form body (POST)
      # @param absent_ok [Boolean] an endpoint not there at all raises Unreachable instead of Error
      # @param ca_file [String, nil] the CA certificates to verify an https endpoint with (default: the system's)
      # @return [String] the body of a 2xx answer
      # @raise [Error] any other answer, or none in time
      def request(method, url, timeout:, what:, headers: {}, form: nil, absent_ok: false, ca_file: nil)
        request = METHODS.fetch(method).new(URI(url), headers)
        request.set_form_data(form) if form
        response = perform(request, timeout, ca_file)
        return response.body.to_s if response.is_a?(Net::HTTPSuccess)

        raise Error, "#{what} answered HTTP #{response.code}#{" (throttled)" if throttled?(response)}: #{response.body.to_s[0, 300]}"
      rescue Net::OpenTimeout, Errno::ECONNREFUSED, Errno::EHOSTUNREACH, Errno::ENETUNREACH, SocketError => e
        raise Unreachable, "#{what} not reachable (#{short(e)})" if absent_ok

        raise Error, "#{what} not reachable at #{url}: #{e.message}"
      rescue Net::ReadTimeout, Net::WriteTimeout, OpenSSL::SSL::SSLError, IOError, SystemCallError => e # EOFError is an IOError
        raise Error, "#{what} did not answer within #{timeout}s: #{short(e)}" unless e.is_a?(OpenSSL::SSL::SSLError)

        raise Error, "#{what}: TLS failed: #{e.message}"
      end

      # @param request [Net::HTTPRequest]
      # @return [Net::HTTPResponse]
      def perform(request, timeout, ca_file)
        http = Net::HTTP.new(request.uri.host, request.uri.port)
        http.use_ssl = request.uri.scheme == "https"
        http.ca_file = ca_file if ca_file
        http.open_timeout = http.read_timeout = http.write_timeout = timeout
        http.start { |session| session.request(request) }
      end

      # @param response [Net::HTTPResponse]
      # @return [Boolean] AWS's throttling (429, or a Throttling error code)
      def throttled?(response) = response.code == "429" || response.body.to_s.include?("Throttling")

      # @param error [Exception]
      # @return [String] its class's own name
      def short(error) = error.class.name.split("::").last
    end
  end
end
