# frozen_string_literal: true

require "open3"

module Upgrade
  # Where an input duplicate came from, read while the cluster still runs:
  # each copy's record and batch in a node's files (Kafka's DumpLogSegments:
  # producer id, epoch, sequence, create time) and what the producer's
  # delivery reports said of that number. Two copies under one producer id
  # and epoch with different sequences: the producer was handed the message
  # twice (an application-level retry); under two epochs: librdkafka wrote it
  # again after an epoch bump, which the broker cannot tell from a new
  # message (idempotence holds within an epoch only).
  class Duplicates
    # Lines of librdkafka's debug log that trace a write's fate around a restart.
    TRACE = /encountered error|ERRSEQ|skipped sequence|epoch bump|Bumping|[Dd]rain|PID|implicitly acked|Timed out|[Rr]etry|possibly persisted/

    # @param data_dirs [Array<String>] each node's data directory
    # @param libs [String] a Kafka version's jars (a glob)
    # @param version [String] that version: DumpLogSegments left package kafka.tools in 4.0
    def initialize(data_dirs, libs, version)
      @data_dirs = data_dirs
      @libs = libs
      @tool = Integer(version.split(".").first) >= 4 ? "org.apache.kafka.tools.DumpLogSegments" : "kafka.tools.DumpLogSegments"
      @partitions = {} # [topic, partition] => { offset => record }
    end

    # @param places [Array<Array(Integer, Integer)>] [partition, offset] of each copy
    # @param reports [Array<String>] the producer's delivery reports for the number ("acked", "failed ERROR")
    # @return [Array<String>] one line per copy, then the delivery reports
    def explain(topic, places, reports)
      copies = places.map { |partition, offset| "copy at #{partition}/#{offset}: #{describe(record(topic, partition, offset))}" }
      copies << "delivery reports for it: #{reports.empty? ? "none" : reports.join(", ")}"
    end

    # The lines of a producer's debug log that say what happened to its writes
    # (errors, epoch bumps, drains, retries) on the given partitions or on no
    # one partition, the first limit of them.
    def self.trace(log, partitions, limit = 60)
      return [] unless File.exist?(log)

      File.foreach(log).select do |line|
        line.match?(TRACE) && (!line.match?(/ \[\d+\]/) || partitions.any? { |partition| line.include?(" [#{partition}]") })
      end.first(limit).map(&:chomp)
    end

    private

    def describe(record)
      return "not read from the nodes' files#{" (#{@error})" if @error}" unless record

      created = Time.at(Integer(record[:CreateTime]) / 1000.0).utc.strftime("%H:%M:%S.%L") # as the debug logs' times
      format("producer %<producerId>s epoch %<producerEpoch>s sequence %<sequence>s (batch %<baseOffset>s-%<lastOffset>s, " \
             "base sequence %<baseSequence>s), created %<created>s UTC, node %<node>s", record.merge(created: created))
    end

    def record(topic, partition, offset)
      (@partitions[[topic, partition]] ||= read(topic, partition))[offset]
    rescue StandardError => e
      @error = "#{e.class}: #{e.message}"
      nil
    end

    # { offset => the record's fields merged into its batch's, with :node }, from the first node holding a copy
    def read(topic, partition)
      @data_dirs.each_with_index do |data, i|
        files = Dir[File.join(data, "#{topic}-#{partition}", "*.log")].sort
        return records(dump(files), i + 1) unless files.empty?
      end
      {}
    end

    def records(dump, node)
      batch = {}
      dump.each_line.with_object({}) do |line, records|
        fields = line.scan(/(\w+): (\S+)/).to_h.transform_keys(&:to_sym)
        if line.start_with?("baseOffset:") then batch = fields
        elsif line.start_with?("| offset:") then records[Integer(fields[:offset])] = batch.merge(fields, node: node)
        end
      end
    end

    def dump(files)
      output, status = Open3.capture2("java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", @libs,
                                      @tool, "--deep-iteration", "--print-data-log",
                                      "--files", files.join(","), err: File::NULL)
      raise "DumpLogSegments failed on #{files.first}" unless status.success?

      output
    end
  end
end
