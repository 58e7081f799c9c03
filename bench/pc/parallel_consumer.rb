# frozen_string_literal: true

require "open3"
require "fileutils"

module Bench
  # bench/parallel.rb's PC rows: ParallelBench.java, compiled here with javac
  # against the jars of tmp/pc/lib (bench/pc/README.md), run in a JVM of its
  # own per cell.
  class ParallelConsumer
    VERSION = "0.5.3.3"
    ROOT = File.expand_path("../..", __dir__)
    LIB = File.join(ROOT, "tmp/pc/lib")
    CLASSES = File.join(ROOT, "tmp/pc/classes")
    SOURCE = File.join(__dir__, "ParallelBench.java")
    ORDERINGS = { key: "KEY", partition: "PARTITION", none: "UNORDERED" }.freeze

    # javac on the PATH and PC's jar in tmp/pc/lib.
    def self.available?
      system("javac -version", out: File::NULL, err: File::NULL) && !Dir[File.join(LIB, "parallel-consumer-core-#{VERSION}.jar")].empty?
    end

    def initialize(brokers, messages, seconds)
      @brokers = brokers
      @messages = messages
      @seconds = seconds
      FileUtils.mkdir_p(CLASSES)
      system("javac", "-nowarn", "-d", CLASSES, "-cp", "#{LIB}/*", SOURCE, exception: true)
    end

    def java_version = `java -version 2>&1`[/version "([^"]+)"/, 1]

    # @return [Array(Integer, Float, Float, Integer)] records, seconds, CPU seconds, order violations
    def cell(topic, ordering, concurrency)
      out, err, status = Open3.capture3("java", "-cp", "#{CLASSES}:#{LIB}/*", "ParallelBench", @brokers, topic, ORDERINGS.fetch(ordering),
                                        concurrency.to_s, @messages.to_s, @seconds.to_s)
      raise "ParallelBench failed: #{err.lines.last(5).join}" unless status.success?

      count, seconds, cpu, violations = out.split
      [Integer(count), Float(seconds), Float(cpu), Integer(violations)]
    end
  end
end
