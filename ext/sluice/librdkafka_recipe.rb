# frozen_string_literal: true

require_relative "../../lib/sluice/version"
require_relative "recipe/cached_build"
require_relative "recipe/dependencies"

module SluiceBuild
  # Builds the pinned librdkafka (Sluice::LIBRDKAFKA) from its release
  # archive with mini_portile2, against the libraries it links, each built
  # from its own pinned source (Dependencies), and says how to link it all
  # into the extension: librdkafka.a and those libraries' archives, nothing
  # of the system's but libc (and Cyrus SASL, for GSSAPI, unless it is built
  # in too). Every archive is
  # checked against its pinned SHA-256 before anything is unpacked; every
  # build is kept in the cache under cache_root, keyed by version and
  # options (librdkafka's by its dependencies' too), so a second extconf run
  # builds nothing. SLUICE_LIBRDKAFKA_VERSION picks another pinned release
  # (Sluice::LIBRDKAFKA_OPT_IN), kept in the cache beside the default's.
  class Librdkafka
    PIN = Pin.new(name: "librdkafka", title: "librdkafka", **Sluice::LIBRDKAFKA)
    VERSION = PIN.version
    VERSION_ENV = "SLUICE_LIBRDKAFKA_VERSION"

    # Features built in: the compressions, SSL, SASL PLAIN/SCRAM/OAUTHBEARER.
    # No libcurl (OIDC token fetching), the bundled lz4. GSSAPI (Kerberos)
    # needs Cyrus SASL: by default the system's, linked dynamically where its
    # headers are installed (configure's "try"); =1 requires it, =0 leaves
    # GSSAPI out, =static builds MIT Kerberos and Cyrus SASL from their pinned
    # sources and links them in (the precompiled gems: nothing to install).
    CONFIGURE = %w[--enable-static --enable-ssl --enable-zstd --enable-zlib --disable-lz4-ext --disable-curl --disable-syslog].freeze
    GSSAPI_ENV = "SLUICE_LIBRDKAFKA_GSSAPI"
    GSSAPI = { "" => [], "0" => %w[--disable-gssapi], "1" => %w[--enable-gssapi], "static" => %w[--enable-gssapi] }.freeze

    # Changes to librdkafka's source, applied in name order before configure
    # (each says why in its header; each belongs upstream): patches/librdkafka/
    # for the pinned release; another release's own versions of those it
    # needed ported are in patches/librdkafka-<version>/, under the same names.
    PATCHES = File.join(__dir__, "patches")

    # @return [Pin] the release SLUICE_LIBRDKAFKA_VERSION names, else the pinned one
    # @raise [Error] for a release that is not pinned
    def self.pin(version = ENV.fetch(VERSION_ENV, ""))
      return PIN if version.empty? || version == VERSION

      pinned = Sluice::LIBRDKAFKA_OPT_IN.fetch(version) do
        raise Error, "#{VERSION_ENV}=#{version}: not a pinned release (#{[VERSION, *Sluice::LIBRDKAFKA_OPT_IN.keys].join(", ")})"
      end
      Pin.new(name: "librdkafka", title: "librdkafka", **pinned)
    end

    # @return [Array<String>] the patch files for the release, in the order they apply
    def self.patches(version)
      own = Dir[File.join(PATCHES, "librdkafka-#{version}", "*.patch")]
      names = own.map { |path| File.basename(path) }
      (Dir[File.join(PATCHES, "librdkafka", "*.patch")].reject { |path| names.include?(File.basename(path)) } + own)
        .sort_by { |path| File.basename(path) }
    end

    # Only what the extension links stays: librdkafka.a, its headers, and
    # what its configure decided (Makefile.config, config.log). The shared library, the
    # bundle of librdkafka with its dependencies (librdkafka-static.a) and
    # pkg-config files were 43 of the 68 MB a build kept.
    KEEP = %w[lib/librdkafka.a include/librdkafka/rdkafka.h include/librdkafka/*.h sluice-Makefile.config sluice-config.log].freeze
    NEEDS = "a C compiler and make"

    Result = Struct.new(:version, :include_dir, :archive, :libs, :built_with, :dependencies, keyword_init: true)

    # @param cache_root [String] where builds and downloaded archives are kept
    # @param archive_dirs [Array<String>] where to look for archives before downloading
    def initialize(cache_root:, archive_dirs: [], log: $stdout, target: Target.current)
      @cache_root = cache_root
      @archive_dirs = archive_dirs
      @log = log
      @target = target
    end

    # @return [Result]
    # @raise [Error] with what to do about it
    def build
      configure_options # refuses an unknown GSSAPI setting or release before anything is downloaded or built
      pin = self.class.pin
      dependencies = Dependencies.new(cache_root: @cache_root, archive_dirs: @archive_dirs, log: @log, target: @target,
                                      gssapi: ENV.fetch(GSSAPI_ENV, "") == "static")
      own = CachedBuild.new(pin, cache_root: @cache_root, archive_dirs: @archive_dirs, log: @log, steps: steps, keep: KEEP, needs: NEEDS,
                                 env: dependencies.configure_env.merge(@target.tools_env), patches: self.class.patches(pin.version),
                                 key: [ENV.fetch("CFLAGS", "")])
      [own, *dependencies.builds].each(&:archive) # every archive at hand before any build starts
      dependencies.builds.each(&:build)
      result(pin.version, own.build, dependencies)
    end

    private

    def configure_options
      setting = ENV.fetch(GSSAPI_ENV, "")
      CONFIGURE + GSSAPI.fetch(setting) do
        raise Error, "#{GSSAPI_ENV}=#{setting}: expected 0 (without GSSAPI), 1 (with the system's Cyrus SASL) or static (built in)"
      end
    end

    # mklove (not autoconf): --host is only noted; the compiler (--cc) and
    # --arch are what a cross build needs. Only the C library is built and installed.
    def steps
      {
        configure: [["./configure", "--prefix={prefix}", *configure_options, *cross_options]],
        compile: [%w[{make} -C src -j{jobs}]],
        install: [%w[{make} -C src install], %w[cp Makefile.config {prefix}/sluice-Makefile.config],
                  %w[cp config.log {prefix}/sluice-config.log]]
      }
    end

    def cross_options
      return [] unless @target.cross?

      ["--host=#{@target.triplet}", "--cc=#{@target.tool("gcc")}", "--cxx=#{@target.tool("g++")}", "--arch=#{@target.cpu}"]
    end

    # What to link: librdkafka.a, then its dependencies as its configure
    # resolved them: the archives built for it, which it must have taken
    # (else the build is not used, and the next one builds again).
    def result(version, prefix, dependencies)
      config = File.read(File.join(prefix, "sluice-Makefile.config"))
      libs = config[/^LIBS\+?=\s*(.*)$/, 1].to_s.strip
      missing = dependencies.archives.values - libs.split
      unless missing.empty?
        FileUtils.rm_f(File.join(prefix, CachedBuild::DONE))
        raise Error, "librdkafka #{version}'s configure did not take #{missing.join(", ")} (it links: #{libs}); " \
                     "why is in #{File.join(prefix, "sluice-config.log")}"
      end
      Result.new(version: version, include_dir: File.join(prefix, "include"), archive: File.join(prefix, "lib", "librdkafka.a"), libs: libs,
                 built_with: config[/^BUILT_WITH\+?=\s*(.*)$/, 1].to_s.split, dependencies: dependencies.labels)
    end
  end
end
