# frozen_string_literal: true

# A long run through network faults (issue 31): idempotent producers at a fixed
# rate and a consumer group of two, all in this process, talking to the
# three-node cluster through its toxiproxies (bin/kafka cluster start), with a
# fault every few minutes rotating over slow links, a blackholed leader,
# refused connections and a reset storm. Every minute it samples this
# process's RSS, open fds and threads, the end-to-end latency (p50/p99, from
# the produce call to the consumer's hand-out) and the lag (acknowledged, not
# yet read). Prints the table as it goes, writes JSON and a gnuplot PNG, and
# exits 1 on any loss or on growth beyond the bounds (see BOUNDS).
#
#   ruby bench/soak.rb [--minutes 30] [--rate 300] [--producers 3] [--fault-every 150]
#                      [--mode fd|thread] [--json FILE] [--plot FILE]
#
# bin/soak runs it (and starts the cluster if it is not running).

require "fileutils"
require "json"
require "logger"
require "open3"
require "optparse"
require "securerandom"
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "sluice"
require_relative "../spec/support/toxiproxy"
require_relative "soak/load"
require_relative "soak/sampler"
require_relative "soak/faults"
require_relative "soak/report"
require_relative "soak/autopsy"

module Soak
  ROOT = File.expand_path("..", __dir__)
  def self.ports(variable, default) = Array.new(3) { |i| "127.0.0.1:#{Integer(ENV.fetch(variable, default)) + i}" }.join(",")

  # The clients go through the proxies; the soak's own admin calls (topic, leader) do not.
  PROXIES = ports("KAFKA_CLUSTER_PROXY_PORT", "29092")
  DIRECT = ports("KAFKA_CLUSTER_INTERNAL_PORT", "19292")

  # Growth allowed from the first minute's sample (after warm-up: connections
  # made, buffers and caches filled) to the last minute's, and the loss allowed.
  # RSS: the larger of 25% and 16 MB (a fault's backlog is buffered, and Ruby's
  # heap keeps the pages it grew to); fds and threads: a few, for connections
  # being remade and a poll thread being replaced at the moment of a sample.
  BOUNDS = { rss_percent: 25, rss_mb: 16, fds: 8, threads: 2, lost: 0, failed: 0 }.freeze

  OPTIONS = { minutes: 30, rate: 300, producers: 3, fault_every: 150, mode: ENV.fetch("SLUICE_POLLING_MODE", "fd").to_sym,
              json: File.join(ROOT, "tmp/soak.json"), plot: File.join(ROOT, "tmp/soak.png") }.freeze

  def self.options(argv)
    options = OPTIONS.dup
    OptionParser.new do |parser|
      parser.banner = "usage: bin/soak [options]"
      parser.on("--minutes N", Integer, "how long (#{options[:minutes]})") { |v| options[:minutes] = v }
      parser.on("--rate N", Integer, "messages per second, all producers together (#{options[:rate]})") { |v| options[:rate] = v }
      parser.on("--producers N", Integer, "idempotent producers (#{options[:producers]})") { |v| options[:producers] = v }
      parser.on("--fault-every S", Integer, "seconds between the starts of two faults (#{options[:fault_every]})") { |v| options[:fault_every] = v }
      parser.on("--mode MODE", %w[fd thread], "polling mode (#{options[:mode]})") { |v| options[:mode] = v.to_sym }
      parser.on("--json FILE", "results (#{options[:json]})") { |v| options[:json] = v }
      parser.on("--plot FILE", "gnuplot PNG (#{options[:plot]})") { |v| options[:plot] = v }
    end.parse!(argv)
    raise OptionParser::InvalidArgument, "--minutes must be at least 2 (the first one is warm-up)" if options[:minutes] < 2

    options
  end

  # The run: load, faults and samples for the given minutes, then the drain and the verdict.
  class Run
    def initialize(options)
      @options = options
      @topic = "sluice-soak-#{SecureRandom.hex(4)}"
    end

    # @return [Boolean] within the bounds
    def call
      create_topic
      load = Load.new(@topic, @options)
      sampler = Sampler.new(load)
      report = Report.new(@options, BOUNDS)
      faults = Faults.new(@topic, DIRECT, @options[:fault_every])
      run_minutes(load, sampler, faults, report)
      totals = load.drain
      final = sampler.sample(faults.during_minute)
      load.close
      report.finish(totals, final)
    ensure
      Toxiproxy.reset
    end

    private

    def run_minutes(load, sampler, faults, report)
      load.start
      started = now
      @options[:minutes].times do |minute|
        faults.run_until(started + ((minute + 1) * 60))
        report.row(sampler.sample(faults.during_minute))
      end
    end

    def create_topic
      admin = Sluice::Admin.new do |config|
        config.kafka = { "bootstrap.servers": DIRECT }
        config.logger = Logger.new(nil)
      end
      admin.create_topic(@topic, partitions: 6, replication_factor: 3)
    ensure
      admin&.close
    end

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end

if $PROGRAM_NAME == __FILE__
  $stdout.sync = true
  exit(Soak::Run.new(Soak.options(ARGV)).call ? 0 : 1)
end
