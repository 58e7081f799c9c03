# frozen_string_literal: true

require "socket"

module Sluice
  module CLI
    # Before a command's first client: a TCP connect to every bootstrap
    # address at once, for up to 2 s. When none answers, the command fails
    # there, naming each address and why (refused, no such host, no answer),
    # where librdkafka would retry them until --timeout and then say only
    # "timed out". One address answering is enough: librdkafka learns the
    # rest of the cluster from it.
    class BrokerProbe
      # How long the addresses are given (at most --timeout).
      TIMEOUT = 2.0 # s

      # No bootstrap address answered.
      class Unreachable < StandardError; end

      # @param brokers [String] bootstrap.servers: [PROTOCOL://]HOST[:PORT], comma-separated
      # @param timeout [Numeric] seconds
      def initialize(brokers, timeout)
        @addresses = brokers.split(",").map(&:strip).reject(&:empty?)
        @timeout = [timeout, TIMEOUT].min.to_f
      end

      # @raise [Unreachable] naming every address and its error
      # @return [void]
      def check!
        failures = @addresses.map { |address| Thread.new { failure(address) } }.map(&:value)
        return if failures.any?(&:nil?)

        tried = @addresses.zip(failures).map { |address, error| "#{address} (#{error})" }
        raise Unreachable, "no broker answered: #{tried.join(", ")}"
      end

      private

      # @return [String, nil] why the address did not answer; nil when it did
      def failure(address)
        host, port = split(address)
        Socket.tcp(host, port, connect_timeout: @timeout, resolv_timeout: @timeout).close
        nil
      rescue Errno::ETIMEDOUT, IOError # IOError: IO::TimeoutError from Ruby 3.2 on
        "no answer"
      rescue SocketError => e
        e.message.sub(/\Agetaddrinfo: /, "")
      rescue SystemCallError => e
        e.message.sub(/ - connect\(2\).*/, "")
      end

      # librdkafka's forms: host, host:port, [v6]:port, v6, with an optional PROTOCOL:// (port 9092 by default).
      def split(address)
        address = address.sub(%r{\A\w+://}, "")
        return [Regexp.last_match(1), Integer(Regexp.last_match(2) || 9092)] if address =~ /\A\[(.+)\](?::(\d+))?\z/
        return [address, 9092] if address.count(":") != 1

        host, port = address.split(":")
        [host, Integer(port, 10)]
      end
    end
  end
end
