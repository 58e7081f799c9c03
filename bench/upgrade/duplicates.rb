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
    # Lines of librdkafka's debug log (eos,msg,broker) that trace a write's
    # fate around a restart: request errors, drains, retries, epoch bumps,
    # disconnects.
    TRACE = / (REQERR|DRAIN|IDEMPSTATE|NEWPID|RESETSEQ|FAIL|ERRSEQ|ERRPID|UNKPID|REQTMOUT|TIMEOUT): |encountered error|implicitly acked|Reconstructed/
    # The trace printed: from this long before the first copy was created to this long after the last.
    BEFORE = 15
    AFTER = 5

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
    # @param log [String] the producer's debug log
    # @return [Array<String>] one line per copy, the delivery reports, then the trace around the copies
    def explain(topic, places, reports, log)
      records = places.map { |partition, offset| record(topic, partition, offset) }
      lines = places.zip(records).map { |(partition, offset), record| "copy at #{partition}/#{offset}: #{describe(record)}" }
      lines << "delivery reports for it: #{reports.empty? ? "none" : reports.join(", ")}"
      lines << "so: #{cause(places, records)}"
      created = records.compact.map { |record| Integer(record[:CreateTime]) / 1000.0 }
      return lines if created.empty?

      # the copies' own batches: produced and delivered (or not), under which PID
      own = records.compact.map { |record| Regexp.new("BaseSeq #{record[:baseSequence]}\\b") }
      lines + trace(log, places.map(&:first).uniq, own, created.min - BEFORE, created.max + AFTER)
    end

    # Epoch bumps in a producer's debug log: ["HH:MM:SS.mmm PID{Id:..,Epoch:..}", ...]
    def self.bumps(log)
      return [] unless File.exist?(log)

      File.foreach(log).filter_map do |line|
        pid = line[/bumped epoch to (PID\{[^}]*\})/, 1]
        "#{line[0, 12]} #{pid}" if pid
      end
    end

    # Every batch of the topic's partitions (producer id, epoch, sequences,
    # partition leader epoch: the leader that wrote it) into file, for a look
    # after the cluster is gone: one JVM for all of them.
    def dump_batches(topic, partitions, file)
      files = Array.new(partitions) do |partition|
        @data_dirs.map { |data| Dir[File.join(data, "#{topic}-#{partition}", "*.log")].sort }.find(&:any?) || []
      end
      File.write(file, dump(files.flatten, deep: false))
    end

    private

    # The log's TRACE lines and those matching one of own, on the given
    # partitions or on none, logged between from and till (epoch seconds; the
    # lines' times are the day's, UTC).
    def trace(log, partitions, own, from, till)
      return ["no debug log #{log}"] unless File.exist?(log)

      day = Time.at(from).utc.then { |t| Time.utc(t.year, t.month, t.day).to_f }
      File.foreach(log).filter_map do |line|
        at = logged_at(line, day)
        next unless at&.between?(from, till) && on?(line, partitions)

        "trace: #{line.chomp}" if line.match?(TRACE) || own.any? { |pattern| line.match?(pattern) }
      end
    end

    # A debug line's time (HH:MM:SS.mmm) as epoch seconds.
    def logged_at(line, day)
      hours, minutes, seconds = line[/\A\d\d:\d\d:\d\d\.\d+/]&.split(":")
      hours && (day + (Integer(hours, 10) * 3600) + (Integer(minutes, 10) * 60) + Float(seconds))
    end

    # The line names one of the partitions ("topic [3]"), or none.
    def on?(line, partitions)
      named = line[/ \[(\d+)\]:? /, 1]
      named.nil? || partitions.include?(Integer(named))
    end

    # What the copies' records say of where the second one came from.
    def cause(places, records)
      return "unknown (a copy not read from the files)" if records.include?(nil)
      return "one record read twice (the reader, not the producer)" if places.uniq.size < places.size

      epochs = records.map { |record| [record[:producerId], record[:producerEpoch]] }.uniq
      if epochs.size == 1
        "two sequences under one producer epoch: the producer was handed the message twice"
      else
        "written under #{epochs.map { |id, epoch| "#{id}/#{epoch}" }.join(" and ")} (producer id/epoch): librdkafka sent it " \
          "again after an epoch bump, which the broker cannot tell from a new message (librdkafka#4953)"
      end
    end

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

    def dump(files, deep: true)
      options = deep ? ["--deep-iteration", "--print-data-log"] : []
      output, status = Open3.capture2("java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", @libs,
                                      @tool, *options, "--files", files.join(","), err: File::NULL)
      raise "DumpLogSegments failed on #{files.first}" unless status.success?

      output
    end
  end
end
