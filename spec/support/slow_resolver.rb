# frozen_string_literal: true

require "fileutils"

# The slow-resolver LD_PRELOAD shim (spec/support/scenarios/slow_resolver.c),
# built into tmp/ when the source is newer, for scenarios of fork/fork_dns_spec.rb.
module SlowResolver
  SOURCE = File.expand_path("scenarios/slow_resolver.c", __dir__)
  LIBRARY = File.expand_path("../../tmp/slow_resolver.so", __dir__)

  class << self
    def library
      build unless File.exist?(LIBRARY) && File.mtime(LIBRARY) >= File.mtime(SOURCE)
      LIBRARY
    end

    # A scenario's environment: the shim after anything preloaded already
    # (bin/asan's libasan must stay first).
    def env = { "LD_PRELOAD" => [ENV.fetch("LD_PRELOAD", nil), library].compact.reject(&:empty?).join(" ") }

    private

    # Built beside the target and renamed: concurrent runs never load half a file.
    def build
      FileUtils.mkdir_p(File.dirname(LIBRARY))
      partial = "#{LIBRARY}.#{Process.pid}"
      system("cc", "-shared", "-fPIC", "-O2", "-Wall", "-o", partial, SOURCE, "-ldl", exception: true)
      File.rename(partial, LIBRARY)
    end
  end
end
