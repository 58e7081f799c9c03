# frozen_string_literal: true

require "digest"
require "fileutils"
require "open3"
require "tmpdir"
require_relative "../../ext/sluice/recipe/archive"

module Packaging
  # A Ruby built from upstream's source with --enable-shared, as the
  # official Docker images and RVM build it: its `ruby` NEEDs
  # libruby.so.3.3, not Debian's libruby-3.3.so.3.3. An extension that named
  # a libruby would load in one of them only; the precompiled gem names none
  # and must load in both (docs/CI.md's table: the Rubies it is tested in).
  #
  # The source is Debian's ruby3.3 source package from trixie, whose orig
  # tarball is upstream's release tarball (configure included); Debian's own
  # patches (debian.tar.xz) are not applied: they would make it Debian's Ruby
  # again. Pinned by SHA-256, .dsc and orig tarball, checked before anything is
  # unpacked (SluiceBuild::Archive, as librdkafka's sources and DebianRuby's
  # .debs). When trixie moves on (a point release replaces 3.3.8-2 and the pool
  # drops it), the download fails: take the new .dsc from the pool
  # (https://deb.debian.org/debian/pool/main/r/ruby3.3/), pin its version and
  # the SHA-256 of it and of the orig tarball it lists (Checksums-Sha256); until
  # then, snapshot.debian.org keeps these two files: SLUICE_RUBY_SOURCE_DSC_URL
  # and SLUICE_RUBY_SOURCE_ORIG_URL (or _ARCHIVE, a downloaded file) name them.
  #
  # Built once per machine, in a temporary directory, and installed (make
  # install DESTDIR=) beside the cache entry, then renamed into it: at
  # ~/.cache/sluice/rubies/source-VERSION-shared-KEY (KEY: a digest of the
  # source's checksums and the configure flags, so another pin or flag builds
  # anew), outside the clone, so that every clone and every CI run on the
  # machine reuses it, and a killed build leaves nothing taken for a Ruby.
  # Two builds take turns (flock); the second finds the first one's Ruby.
  class SourceRuby
    VERSION = "3.3.8"
    DEBIAN_VERSION = "3.3.8-2" # trixie's
    POOL = "https://deb.debian.org/debian/pool/main/r/ruby3.3"
    SHA256 = {
      "ruby3.3_#{DEBIAN_VERSION}.dsc" => "6741e84b43dfe0e63acf400920208b7f7ff025df161dae3df6534a5583be9368",
      "ruby3.3_#{VERSION}.orig.tar.xz" => "e2e1233ad275b7623a05edf23a01192626d1da454bdfe353a28a87acd8ef015c"
    }.freeze
    # --without-baseruby: Debian's orig tarball leaves out the bundled gems (gems/*.gem: minitest, rake,
    # ...; Debian packages them apart), and with a baseruby (this machine's Ruby) make downloads them
    # from rubygems.org, which a CI machine may not reach; without one it does not, and a release
    # tarball needs none (its generated sources are in it). The bundled gems are then left out of the
    # install (rbinstall.rb skips them), which nothing here uses.
    # optflags=-O1 debugflags=: what is tested is how the gem loads into this Ruby (libruby.so, its paths),
    # not the interpreter's speed, and Ruby's default -O3 -ggdb3 is the slowest to compile (CONTRIBUTING.md's
    # table: the build's time cold).
    CONFIGURE_FLAGS = %w[--enable-shared --disable-install-doc --without-baseruby optflags=-O1 debugflags=].freeze
    # Debian 12's packages for what Ruby's bundled extensions link: zlib, openssl, psych (libyaml).
    BUILD_PACKAGES = %w[gcc make libc6-dev zlib1g-dev libssl-dev libyaml-dev].freeze
    CACHE = File.join(ENV.fetch("XDG_CACHE_HOME", File.join(Dir.home, ".cache")), "sluice", "rubies")
    DONE = ".sluice-built" # written last inside the tree: a directory without it is not one
    LIBRUBY = "libruby.so.3.3" # upstream's soname; Debian's is libruby-3.3.so.3.3

    def initialize(cache_root: CACHE, log: $stdout)
      @cache_root = cache_root
      @log = log
    end

    def minor = VERSION[/\A\d+\.\d+/]

    # @return [String] where it is installed (its --prefix)
    def prefix = File.join(@cache_root, "source-#{VERSION}-shared-#{key}")

    def ruby = File.join(prefix, "bin", "ruby")

    def gem = File.join(prefix, "bin", "gem")

    def built? = File.exist?(File.join(prefix, DONE))

    # Built unless the cache has it; either way checked to need upstream's libruby.
    # @return [self]
    def prepare
      FileUtils.mkdir_p(@cache_root)
      File.open("#{prefix}.lock", File::RDWR | File::CREAT, 0o644) do |lock|
        lock.flock(File::LOCK_EX)
        built? ? say("using #{prefix}") : build
      end
      check_libruby
      self
    end

    # @return [Array<String>] the shared libraries `ruby` NEEDs (readelf -d)
    def needed = run({}, "readelf", "-d", ruby).scan(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/).flatten

    private

    def say(text) = @log.puts("sluice: Ruby #{VERSION} from source: #{text}")

    def key = Digest::SHA256.hexdigest([SHA256.sort, CONFIGURE_FLAGS].inspect)[0, 10]

    def log_file = "#{prefix}.log"

    def check_libruby
      return if needed.include?(LIBRUBY)

      raise "#{ruby} NEEDs #{needed.join(", ")}, not #{LIBRUBY}: not the Ruby with a shared libruby of upstream's name"
    end

    def build
      install_build_packages
      tarball = sources.fetch("ruby3.3_#{VERSION}.orig.tar.xz")
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      say "building into #{prefix} (log: #{log_file})"
      staging = "#{prefix}.part.#{Process.pid}" # beside it: the rename below stays on one file system
      Dir.mktmpdir("sluice-ruby-") { |dir| compile(tarball, dir, staging) }
      File.write(File.join(staging, prefix, DONE), "#{SHA256.inspect} #{CONFIGURE_FLAGS.join(" ")}\n")
      FileUtils.rm_rf(prefix) # a directory there without DONE is no build (put there by hand)
      File.rename(File.join(staging, prefix), prefix)
      say format("built in %.0f s", Process.clock_gettime(Process::CLOCK_MONOTONIC) - started)
    ensure
      FileUtils.rm_rf(staging) if staging
    end

    def compile(tarball, dir, staging)
      File.write(log_file, "")
      logged("tar", "-xJf", tarball, "-C", dir)
      source = File.join(dir, "ruby-#{VERSION}")
      logged("./configure", "--prefix=#{prefix}", *CONFIGURE_FLAGS, chdir: source)
      logged("make", "-j2", chdir: source)
      logged("make", "install", "DESTDIR=#{staging}", chdir: source)
    end

    # Quiet unless it fails: then the log's tail, the whole log left where it is.
    def logged(*command, chdir: nil)
      ok = File.open(log_file, "a") do |log|
        log.puts("$ #{command.join(" ")}")
        log.flush
        system(*command, out: log, err: log, **{ chdir: chdir }.compact)
      end
      return if ok

      tail = File.readlines(log_file).last(40).join
      raise "#{command.join(" ")} failed building Ruby #{VERSION} (whole log: #{log_file}):\n#{tail}"
    end

    # Packaging.run's, without RSpec: `ruby -r ./spec/support/source_ruby` builds it too.
    def run(env, *command)
      output, status = Open3.capture2e(env, *command)
      raise "#{command.join(" ")} failed (#{status}):\n#{output}" unless status.success?

      output
    end

    def install_build_packages
      missing = BUILD_PACKAGES.reject { |package| system("dpkg-query -W -f='${Status}' #{package} 2>/dev/null | grep -q 'ok installed'") }
      return if missing.empty?

      say "installing #{missing.join(", ")}"
      run({ "DEBIAN_FRONTEND" => "noninteractive" }, "sh", "-c",
          'apt-get update -q && apt-get install -q -y --no-install-recommends "$@"', "sh", *missing)
    end

    # @return [Hash{String => String}] file name => its verified path in the cache
    def sources
      downloads = File.join(@cache_root, "sources")
      paths = SHA256.to_h do |file, sha256|
        name = file.end_with?(".dsc") ? "ruby_source_dsc" : "ruby_source_orig" # SLUICE_RUBY_SOURCE_ORIG_ARCHIVE=...
        pin = SluiceBuild::Pin.new(name: name, title: "ruby3.3 source", version: DEBIAN_VERSION, sha256: { file => sha256 },
                                   urls: ["#{POOL}/#{file}"])
        [file, SluiceBuild::Archive.new(pin, dirs: [downloads], download_dir: downloads, log: @log).path]
      end
      listed_in_dsc!(paths)
      paths
    end

    # The orig tarball is the one the .dsc names: the pin of one is not stale beside the other's.
    def listed_in_dsc!(paths)
      dsc = File.read(paths.fetch("ruby3.3_#{DEBIAN_VERSION}.dsc"))
      orig = "ruby3.3_#{VERSION}.orig.tar.xz"
      return if dsc.include?("#{SHA256.fetch(orig)} ") && dsc.include?(orig)

      raise "#{paths.fetch("ruby3.3_#{DEBIAN_VERSION}.dsc")} does not list #{orig} with SHA-256 #{SHA256.fetch(orig)}"
    end
  end
end
