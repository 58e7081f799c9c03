# frozen_string_literal: true

require "etc"

module Bench
  # What every benchmark runner records beside its numbers: the machine and
  # the versions in use, the brokers it talks to, and the median it reports.
  module Environment
    ROOT = File.expand_path("..", __dir__)

    def machine
      @machine ||= {
        cpu: File.read("/proc/cpuinfo")[/model name\s*:\s*(.+)/, 1], cores: Etc.nprocessors,
        memory: "#{(File.read("/proc/meminfo")[/MemTotal:\s+(\d+)/, 1].to_i / 1024.0 / 1024).round} GiB",
        librdkafka: `pkg-config --modversion rdkafka`.strip,
        kafka: Dir[File.join(ROOT, "tmp/kafka/libs/kafka_2.13-*.jar")].first.to_s[/kafka_2\.13-([\d.]+)\.jar/, 1] || "unknown"
      }
    end

    def brokers = ENV.fetch("KAFKA_BROKERS", "127.0.0.1:9092")
    def median(values) = values.empty? ? 0 : values.sort[values.size / 2]
  end
end
