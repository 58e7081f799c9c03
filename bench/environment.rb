# frozen_string_literal: true

require "digest"
require "etc"
require "fileutils"
require "rbconfig"

module Bench
  # What every benchmark runner records beside its numbers: the machine and
  # the versions in use, the brokers it talks to, and the median it reports.
  module Environment
    ROOT = File.expand_path("..", __dir__)

    def machine
      @machine ||= {
        cpu: File.read("/proc/cpuinfo")[/model name\s*:\s*(.+)/, 1], cores: Etc.nprocessors,
        memory: "#{(File.read("/proc/meminfo")[/MemTotal:\s+(\d+)/, 1].to_i / 1024.0 / 1024).round} GiB",
        librdkafka: "#{librdkafka_version} (#{system_librdkafka? ? "the system's" : "bundled, linked in"})",
        kafka: kafka_version || "unknown"
      }
    end

    # The librdkafka the extension was built with (the runners load no sluice themselves).
    def librdkafka_version
      @librdkafka_version ||= IO.popen([RbConfig.ruby, "-I#{ROOT}/lib", "-rsluice", "-e", "print Sluice.librdkafka_version"], &:read)
    end

    def system_librdkafka? = ENV["SLUICE_USE_SYSTEM_LIBRDKAFKA"] == "1"

    # The Kafka the local broker runs: bin/kafka's jars for KAFKA_VERSION (its
    # default, 3.9.1, when unset), one directory per version under tmp/kafka/libs.
    def kafka_version
      dir = File.join(ROOT, "tmp/kafka/libs", ENV.fetch("KAFKA_VERSION", "3.9.1"))
      Dir[File.join(dir, "kafka_2.13-*.jar")].first.to_s[/kafka_2\.13-([\d.]+)\.jar/, 1]
    end

    # A C benchmark (../shared/tools) built against the librdkafka sluice runs
    # on, so the two compare like for like: the bundled build linked in as the
    # extension links it, or the system's through pkg-config. Rebuilt when the
    # source or the flags change. @return [String] the binary
    def c_benchmark(source, cflags: "-O2")
      flags = "#{cflags} #{librdkafka_c_flags} -lpthread"
      binary = File.join(ROOT, "tmp", "c-bench", "#{File.basename(source, ".c")}-#{Digest::SHA256.hexdigest(flags + File.read(source))[0, 12]}")
      return binary if File.exist?(binary)

      FileUtils.mkdir_p(File.dirname(binary))
      system("cc -o #{binary} #{source} #{flags}") or raise "cannot build #{source} (#{flags})"
      binary
    end

    def librdkafka_c_flags
      return `pkg-config --cflags --libs rdkafka`.strip if system_librdkafka?

      require_relative "../ext/sluice/librdkafka_recipe"
      cache = File.join(ROOT, "tmp", "librdkafka")
      build = File.open(File::NULL, "w") do |quiet|
        SluiceBuild::Librdkafka.new(cache_root: cache, archive_dirs: [File.join(cache, "archives")], log: quiet).build
      end
      "-isystem #{build.include_dir} #{build.archive} #{build.libs}"
    end

    RESULTS = File.join(ROOT, "bench/RESULTS.md")
    # A runner's own block of RESULTS.md, between its marks; bin/bench (bench/run.rb) keeps every block.
    BLOCK = /^<!-- ([\w-]+)-bench:begin.*?^<!-- \1-bench:end -->\n?/m # names with a hyphen too (parallel-pc)

    def write_block(name, markdown, command: name)
      old = File.exist?(RESULTS) ? File.read(RESULTS) : "# Benchmark results\n"
      block = "<!-- #{name}-bench:begin (written by bin/bench #{command}; bin/bench keeps it) -->\n#{markdown.strip}\n<!-- #{name}-bench:end -->\n"
      pattern = /^<!-- #{name}-bench:begin.*?^<!-- #{name}-bench:end -->\n?/m
      File.write(RESULTS, old.match?(pattern) ? old.sub(pattern) { block } : "#{old.rstrip}\n\n#{block}")
    end

    def brokers = ENV.fetch("KAFKA_BROKERS", "127.0.0.1:9092")
    def median(values) = values.empty? ? 0 : values.sort[values.size / 2]
  end
end
