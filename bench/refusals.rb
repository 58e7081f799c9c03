# frozen_string_literal: true

# How long each call family takes to name a refusal (issue 29): a wrong SCRAM
# password, an untrusted broker certificate, an OAUTHBEARER listener whose
# token service is down. Prints a Markdown table, call family x failure kind
# -> the error class and the seconds of the first call and of a later one.
# Against bin/kafka's SCRAM (9095), SSL (9096) and SASL (9094) listeners.
#
#   ruby bench/refusals.rb [--wait MS]   # max_wait_timeout of every client (default 10000)

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "sluice"
require "optparse"
require "securerandom"

module Bench
  # One row per call family, one column per failure kind.
  module Refusals
    HOST = "127.0.0.1"
    TOPIC = "sluice-spec-1p"

    module_function

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

    def kinds
      {
        "wrong SCRAM password" => { "bootstrap.servers": "#{HOST}:#{ENV.fetch("KAFKA_SCRAM_PORT", "9095")}",
                                    "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-512",
                                    "sasl.username": "alice", "sasl.password": "wrong" },
        "untrusted certificate" => { "bootstrap.servers": "#{HOST}:#{ENV.fetch("KAFKA_SSL_PORT", "9096")}",
                                     "security.protocol": "SSL", "ssl.ca.location": "/etc/ssl/certs/ca-certificates.crt" },
        "token service down" => { "bootstrap.servers": "#{HOST}:#{ENV.fetch("KAFKA_SASL_PORT", "9094")}",
                                  "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "OAUTHBEARER" }
      }
    end

    def families
      {
        "Producer#produce_sync" => [:producer, ->(p) { p.produce_sync(topic: TOPIC, payload: "x") }],
        "Producer#flush_sync" => [:producer, ->(p) { p.buffer(topic: TOPIC, payload: "x") && p.flush_sync }],
        "Producer#partition_count" => [:producer, ->(p) { p.partition_count("#{TOPIC}-#{SecureRandom.hex(3)}") }],
        "Producer#transaction" => [:transactional, ->(p) { p.transaction { p.produce_async(topic: TOPIC, payload: "x") } }],
        "Consumer#poll" => [:consumer, ->(c) { c.poll(60_000) }],
        "Consumer#each_batch" => [:consumer, ->(c) { c.each_batch { nil } }],
        "Consumer#query_watermark_offsets" => [:consumer, ->(c) { c.query_watermark_offsets(TOPIC, 0) }],
        "Admin#topics (metadata)" => [:admin, lambda(&:topics)],
        "Admin#create_topic (request)" => [:admin, ->(a) { a.create_topic("sluice-never-#{SecureRandom.hex(3)}", partitions: 1) }],
        "Admin#committed_offsets (request)" => [:admin, ->(a) { a.committed_offsets("sluice-never") }]
      }
    end

    def monitor
      Sluice::Monitor.new.tap do |m|
        m.subscribe("oauthbearer.token_refresh") { |event| event[:bearer].oauthbearer_set_token_failure("token service down") }
      end
    end

    def build(kind, kafka, wait)
      case kind
      when :producer, :transactional
        extra = kind == :transactional ? { "transactional.id": "sluice-refusals-#{SecureRandom.hex(4)}" } : {}
        Sluice::Producer.new do |c|
          c.kafka = kafka.merge(extra)
          c.monitor = monitor
          c.max_wait_timeout = wait
          c.logger = Logger.new(nil)
        end
      when :consumer
        consumer = Sluice::Consumer.new do |c|
          c.kafka = kafka.merge("group.id": "sluice-refusals-#{SecureRandom.hex(4)}")
          c.monitor = monitor
          c.max_wait_timeout = wait
          c.logger = Logger.new(nil)
        end
        consumer.subscribe(TOPIC)
        consumer
      when :admin
        Sluice::Admin.new do |c|
          c.kafka = kafka
          c.monitor = monitor
          c.max_wait_timeout = wait
          c.logger = Logger.new(nil)
        end
      end
    end

    # "AuthenticationError 0.31 / 0.50 s" for a first and a later call.
    def cell(kind, kafka, call, wait)
      client = build(kind, kafka, wait)
      (first, first_s), (later, later_s) = Array.new(2) { outcome(client, call) }
      "#{[first, later].uniq.join(", ")} #{format("%.2f / %.2f", first_s, later_s)} s"
    ensure
      client&.close
    end

    # [the error's class name (or "returned"), seconds]
    def outcome(client, call)
      started = now
      name = begin
        call.call(client)
        "returned"
      rescue Sluice::Errors::BaseError => e
        e.class.name.split("::").last
      end
      [name, now - started]
    end

    def run(wait)
      puts "librdkafka #{Sluice.librdkafka_version}, max_wait_timeout #{wait} ms; each cell: the error, first call / later call"
      puts
      puts "| call | #{kinds.keys.join(" | ")} |"
      puts "|---|#{"---|" * kinds.size}"
      families.each do |name, (kind, call)|
        puts "| #{name} | #{kinds.values.map { |kafka| cell(kind, kafka, call, wait) }.join(" | ")} |"
      end
    end
  end
end

wait = 10_000
OptionParser.new { |o| o.on("--wait MS", Integer) { |v| wait = v } }.parse!
Bench::Refusals.run(wait)
