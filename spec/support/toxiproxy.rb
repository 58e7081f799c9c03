# frozen_string_literal: true

require "json"
require "net/http"

# Shopify's toxiproxy in front of each node of the three-node cluster
# (`bin/kafka cluster start` runs it): proxy kafka-N forwards the clients'
# connections to node N, whose CLIENT listener advertises the proxy, while
# the nodes replicate directly. A fault on kafka-N cuts node N off from the
# clients only. Driven through toxiproxy's HTTP API (its Ruby client is not
# packaged for Debian).
module Toxiproxy
  API = URI("http://127.0.0.1:#{ENV.fetch("TOXIPROXY_PORT", "8474")}")
  NODES = [1, 2, 3].freeze

  # A toxiproxy API call answered with an error.
  class Error < StandardError; end

  class << self
    def proxy(node) = "kafka-#{node}"

    # Adds a toxic to node's proxy in one or both directions ("upstream" is
    # client to broker, "downstream" broker to client).
    # @param streams [Array<String>]
    def add(node, type, streams: %w[upstream downstream], **attributes)
      streams.each do |stream|
        request(:post, "/proxies/#{proxy(node)}/toxics",
                { name: "#{type}_#{stream}", type: type.to_s, stream: stream, toxicity: 1.0, attributes: attributes })
      end
    end

    def remove(node, type, streams: %w[upstream downstream])
      streams.each { |stream| request(:delete, "/proxies/#{proxy(node)}/toxics/#{type}_#{stream}") }
    end

    # A disabled proxy closes its connections and refuses new ones.
    def disable(node) = enabled(node, false)

    def enable(node) = enabled(node, true)

    # Every proxy enabled, every toxic removed.
    def reset = request(:post, "/reset")

    # @return [Hash{String => Array<String>}] proxy => names of its toxics
    def toxics
      request(:get, "/proxies").transform_values { |proxy| proxy.fetch("toxics").map { |toxic| toxic.fetch("name") } }
    end

    def running?
      request(:get, "/version")
      true
    rescue SystemCallError, Error
      false
    end

    # Runs the block with a fault applied, and heals it however the block
    # ends: a failing example never leaks a fault into the next one.
    def with(fault)
      fault.apply
      yield
    ensure
      fault.heal
    end

    private

    # PATCH: toxiproxy 2.12 logs POST for an update as deprecated.
    def enabled(node, value) = request(:patch, "/proxies/#{proxy(node)}", { enabled: value })

    # The connection failures of a toxiproxy-server that died: bin/kafka's
    # supervisor starts it again (with every proxy enabled, no toxics) within
    # a second or two, and the call is made again on the new one. The output
    # says so; bin/test-cluster counts the restarts from toxiproxy's log.
    DOWN = [Errno::ECONNREFUSED, Errno::ECONNRESET, EOFError].freeze
    RESTART_WAIT = 15 # s
    # The supervisor's pid (bin/kafka's toxiproxy_start, in bin/lib/kafka/toxiproxy.sh); the server is its child.
    SUPERVISOR_PID_FILE = File.expand_path("../../tmp/kafka/#{API.port == 8474 ? "toxiproxy" : "toxiproxy-#{API.port}"}/toxiproxy.pid",
                                           __dir__)

    def request(verb, path, body = nil)
      request = { get: Net::HTTP::Get, post: Net::HTTP::Post, patch: Net::HTTP::Patch, delete: Net::HTTP::Delete }.fetch(verb).new(path)
      request.content_type = "application/json"
      request.body = JSON.generate(body) if body
      response = with_restarts(verb, path) do
        Net::HTTP.start(API.host, API.port, open_timeout: 5, read_timeout: 10) { |http| http.request(request) }
      end
      raise Error, "toxiproxy #{verb.upcase} #{path}: #{response.code} #{response.body}" unless response.is_a?(Net::HTTPSuccess)

      response.body.to_s.empty? ? nil : JSON.parse(response.body)
    end

    # A server that hangs instead (2.12's toxic updates can wait forever on a
    # link that is closing: CI once saw a toxic's POST unanswered for 10 s,
    # its log ending in "Waiting to update links") is killed, and so
    # restarted like one that died: up to KILLS times per call (a rehearsal
    # saw the restarted server hang again on the same POST /reset, while the
    # clients' reconnections were closing on it).
    KILLS = 3
    def with_restarts(verb, path)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + RESTART_WAIT
      warned = false
      killed = 0
      begin
        yield
      rescue Net::ReadTimeout => e
        raise if killed >= KILLS

        warn "toxiproxy #{verb.upcase} #{path}: #{e.class} (the server hangs), killing it for its supervisor to restart"
        kill_server
        killed += 1
        warned = false
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + RESTART_WAIT
        retry
      rescue *DOWN => e
        raise if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

        warn "toxiproxy #{verb.upcase} #{path}: #{e.class} (the server died?), trying again" unless warned
        warned = true
        sleep(0.2) # the supervisor's restart: nothing to wait on but the port
        retry
      end
    end

    def kill_server
      supervisor = Integer(File.read(SUPERVISOR_PID_FILE))
      children = File.read("/proc/#{supervisor}/task/#{supervisor}/children").split.map { |pid| Integer(pid) }
      raise Error, "toxiproxy hangs, and its supervisor (pid #{supervisor}) has no server to kill" if children.empty?

      children.each { |pid| Process.kill("KILL", pid) }
    end
  end

  # A network fault on some of the proxies: #apply starts it, #heal ends it
  # (and may be called after a partial #apply).
  class Fault
    attr_reader :name, :nodes

    # @param name [String] what the output calls it
    # @param nodes [Array<Integer>] the nodes it cuts off or slows
    def initialize(name, nodes, &toxics)
      @name = name
      @nodes = nodes
      @toxics = toxics
    end

    def apply = @nodes.each { |node| @toxics.call(node) }

    # Removes everything, not only what #apply added: a heal must leave the
    # proxies clean even after an #apply that raised half-way.
    def heal = Toxiproxy.reset

    def to_s = "#{@name} (node#{"s" if @nodes.size > 1} #{@nodes.join(",")})"
  end

  # The faults of the issue (31), each ready to apply to a set of nodes.
  module Faults
    module_function

    # 300 ms +-100 ms each way, 100 KB/s each way, and a closed connection
    # reaching the other side 1 s late.
    def slow(nodes)
      Fault.new("slow network", nodes) do |node|
        Toxiproxy.add(node, :latency, latency: 300, jitter: 100)
        Toxiproxy.add(node, :bandwidth, rate: 100)
        Toxiproxy.add(node, :slow_close, delay: 1_000)
      end
    end

    # Connections stay open, nothing gets through either way, nothing is
    # answered: only a client's own timeouts notice.
    def blackhole(nodes)
      Fault.new("blackhole", nodes) { |node| Toxiproxy.add(node, :timeout, timeout: 0) }
    end

    # Open connections closed, new ones refused.
    def refuse(nodes)
      Fault.new("refused", nodes) { |node| Toxiproxy.disable(node) }
    end

    # Every connection reset (TCP RST) as soon as data arrives.
    def reset(nodes)
      Fault.new("reset", nodes) { |node| Toxiproxy.add(node, :reset_peer, streams: ["upstream"], timeout: 0) }
    end
  end
end
