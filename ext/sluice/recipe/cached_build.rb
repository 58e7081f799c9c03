# frozen_string_literal: true

require "digest"
require "etc"
require "fileutils"
require "rbconfig"
require_relative "archive"
require_relative "port"

module SluiceBuild
  # One pinned source built once into the cache, under
  # <cache_root>/<name>-<version>-<key>: the key is a digest of all the build
  # depends on (its steps and environment, the compiler, patches, what it
  # links), so a changed pin or setting builds anew instead of reusing a
  # build made otherwise. Two builds sharing a cache take turns; a failed
  # build leaves nothing that could be taken for a build.
  class CachedBuild
    JOBS_ENV = "SLUICE_LIBRDKAFKA_JOBS" # make -j of every build of the cache
    DONE = "sluice-build.done" # written last: a build without it is not one

    # @param steps [Hash{Symbol => Array<Array<String>>}] commands per step (Port::STEPS); {prefix},
    #   {jobs} and {make} in them are filled in
    # @param keep [Array<String>] what stays of the installed build (globs under the prefix; each must match)
    # @param needs [String] what the build needs, named when it fails
    # @param key [Array<String>] more of what the build depends on
    def initialize(pin, cache_root:, archive_dirs:, log:, steps:, keep:, needs:, env: {}, patches: [], key: [])
      @pin = pin
      @cache_root = cache_root
      @archive_dirs = archive_dirs
      @log = log
      @steps = steps
      @keep = keep
      @needs = needs
      @env = env
      @patches = patches
      @key = key
    end

    def prefix = @prefix ||= File.join(@cache_root, "#{@pin.name}-#{@pin.version}-#{digest}")

    def built? = File.exist?(File.join(prefix, DONE))

    # The verified archive, unless the cache has the build already (then
    # none is needed): before anything is built, so that a missing archive
    # is named at once, not after minutes of building the others.
    # @return [String, nil]
    # @raise [Error]
    def archive
      return if built?

      @archive ||= Archive.new(@pin, dirs: @archive_dirs, download_dir: File.join(@cache_root, "archives"), log: @log).path
    end

    # @return [String] the prefix the build is installed under
    # @raise [Error] with what to do about it
    def build
      exclusively do
        if built?
          say "using the build in #{prefix}"
        else
          cook(archive)
          File.write(File.join(prefix, DONE), Time.now.utc.to_s)
        end
      end
      prefix
    end

    private

    def say(text) = @log.puts("sluice: #{@pin.label}: #{text}")

    def jobs = Integer(ENV.fetch(JOBS_ENV, Etc.nprocessors.to_s))

    def digest
      patches = @patches.map { |path| Digest::SHA256.file(path).hexdigest }
      inputs = [@steps, @env, @keep, RbConfig::CONFIG["CC"], ENV.fetch("CC", ""), *patches, *@key]
      Digest::SHA256.hexdigest(inputs.map(&:inspect).join("\n"))[0, 12]
    end

    # Two builds sharing one cache (two `rake compile`s, a gem install beside
    # a checkout) take turns: the second waits for the first and then uses
    # its build, instead of deleting the first's work under it. An flock:
    # released by the system if the holder dies.
    def exclusively
      FileUtils.mkdir_p(@cache_root)
      File.open("#{prefix}.lock", File::RDWR | File::CREAT, 0o644) do |lock|
        unless lock.flock(File::LOCK_EX | File::LOCK_NB)
          say "another build into #{prefix} is under way; waiting for it"
          lock.flock(File::LOCK_EX)
        end
        yield
      end
    end

    def cook(archive)
      port = Port.new(@pin, archive, prefix, steps: filled_in_steps, env: @env, patches: @patches, log: @log)
      say "building with make -j#{jobs}; logs under #{port.work_root}"
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      cpu = children_cpu
      port.cook
      prune
      port.clean
      say format("built in %.0f s (%.0f s of CPU) into %s", Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, children_cpu - cpu, prefix)
    rescue Port::Failed, RuntimeError => e
      FileUtils.rm_rf(prefix) # nothing half-built stays to be mistaken for a build
      log = e.is_a?(Port::Failed) ? "its #{e.step} step failed; the log: #{e.log}" : "#{e.message}; logs under #{port&.work_root}"
      raise Error, "building #{@pin.label} failed: #{log}. It needs #{@needs}; " \
                   "SLUICE_USE_SYSTEM_LIBRDKAFKA=1 uses an installed librdkafka instead"
    end

    # The CPU time of the build's commands (user and system, all their processes): beside the wall time, it
    # says whether a slow build was the compiler's work or a machine busy with other work.
    def children_cpu = Process.times.then { |times| times.cutime + times.cstime }

    def filled_in_steps
      values = { prefix: prefix, jobs: jobs, make: ENV.fetch("MAKE", "make") }
      @steps.transform_values do |commands|
        commands.map { |command| command.map { |arg| arg.gsub(/\{(prefix|jobs|make)\}/) { values.fetch(Regexp.last_match(1).to_sym).to_s } } }
      end
    end

    # Only what is linked, or read by a later build, stays in the cache (and
    # in every installed source gem until it is installed); and all of it.
    def prune
      Dir.glob("**/*", base: prefix).sort.reverse_each do |path| # children before their directory
        full = File.join(prefix, path)
        if File.symlink?(full) || !File.directory?(full)
          File.delete(full) unless kept?(path)
        elsif Dir.empty?(full)
          Dir.rmdir(full)
        end
      end
      missing = @keep.reject { |pattern| Dir.glob(pattern, base: prefix).any? }
      raise "its install left no #{missing.join(", ")}" unless missing.empty?
    end

    def kept?(path) = @keep.any? { |pattern| File.fnmatch?(pattern, path, File::FNM_PATHNAME) }
  end
end
