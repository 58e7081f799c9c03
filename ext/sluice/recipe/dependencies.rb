# frozen_string_literal: true

require_relative "../../../lib/sluice/version"
require_relative "cached_build"
require_relative "target"

module SluiceBuild
  # The libraries librdkafka links besides itself (zlib, zstd, OpenSSL; lz4
  # is its own copy), each built from the source pinned in
  # Sluice::LIBRDKAFKA_DEPENDENCIES, static and position-independent, into
  # the cache beside librdkafka's build. librdkafka's configure is pointed at
  # exactly these archives (STATIC_LIB_<name>, which mklove links instead of
  # searching), so it never takes whatever static library a system has:
  # Debian 13's libz.a, for one, cannot go into a shared object.
  class Dependencies
    # Only what builds the static libraries, their headers and pkg-config
    # files; each its own compiler flags (the user's CFLAGS are for
    # librdkafka and the extension: OpenSSL would drop its own for them).
    OPENSSL_OPTIONS = %w[--prefix={prefix} --libdir=lib --openssldir=/usr/lib/ssl no-shared no-module no-apps no-tests no-docs -fPIC].freeze
    BUILDS = {
      zlib: {
        title: "zlib",
        libraries: { "zlib" => "libz.a" }, # mklove's name => the archive
        headers: %w[zlib.h zconf.h],
        needs: "a C compiler and make",
        env: { "CFLAGS" => "-O3 -fPIC" },
        steps: {
          configure: [%w[./configure --static --prefix={prefix}]],
          compile: [%w[{make} -j{jobs} libz.a]],
          install: [%w[{make} install]]
        },
        # Its configure takes CC, AR and RANLIB from CHOST's prefix.
        cross: ->(target) { { env: { "CHOST" => target.triplet } } }
      },
      zstd: {
        title: "zstd",
        libraries: { "libzstd" => "libzstd.a" },
        headers: %w[zstd.h zstd_errors.h zdict.h],
        needs: "a C compiler and make",
        env: { "CFLAGS" => "-O3 -fPIC" }, # from the environment: the Makefile appends its own flags to it
        steps: {
          compile: [%w[{make} -C lib -j{jobs} libzstd.a-release]],
          install: [%w[{make} -C lib install-static install-includes install-pc PREFIX={prefix}]]
        },
        cross: ->(target) { { env: target.tools_env } } # no configure: the Makefile takes CC and AR from the environment
      },
      # The libraries only (no openssl command, tests or manuals). Modules
      # built in (the legacy provider: ssl.providers=legacy works without a
      # file to load), and the configuration and CA certificates looked up
      # where Debian and Ubuntu keep them, as with Debian's own OpenSSL
      # (elsewhere: ssl.ca.location, a file or "probe").
      openssl: {
        title: "OpenSSL",
        libraries: { "libssl" => "libssl.a", "libcrypto" => "libcrypto.a" },
        headers: %w[openssl/*.h],
        needs: "a C compiler, make and perl (OpenSSL's Configure; Debian: apt-get install perl)",
        env: {},
        steps: {
          configure: [["./config", *OPENSSL_OPTIONS]],
          compile: [%w[{make} -j{jobs} build_libs]],
          install: [%w[{make} install_dev]]
        },
        # ./config guesses the target from this machine; Configure is told it,
        # and prefixes CC, AR and RANLIB itself (so CC is not given too).
        cross: lambda do |target|
          { steps: { configure: [["./Configure", target.openssl_target, "--cross-compile-prefix=#{target.tool("")}",
                                  *OPENSSL_OPTIONS]] } }
        end
      }
    }.freeze
    OWN_FLAGS = { "CFLAGS" => nil, "CPPFLAGS" => nil, "LDFLAGS" => nil }.freeze

    def self.pins
      BUILDS.to_h { |name, build| [name, Pin.new(name: name.to_s, title: build[:title], **Sluice::LIBRDKAFKA_DEPENDENCIES.fetch(name))] }
    end

    def initialize(cache_root:, archive_dirs:, log:, target: Target.current)
      @cache_root = cache_root
      @archive_dirs = archive_dirs
      @log = log
      @target = target
    end

    # @return [Array<String>] "zlib 1.3.1", ...
    def labels = self.class.pins.values.map(&:label)

    # @return [Array<CachedBuild>] one per dependency, in build order
    def builds
      @builds ||= self.class.pins.map do |name, pin|
        build = BUILDS.fetch(name)
        steps, env = for_target(build)
        CachedBuild.new(pin, cache_root: @cache_root, archive_dirs: @archive_dirs, log: @log, steps: steps,
                             env: OWN_FLAGS.merge(env), keep: keep(build), needs: build[:needs])
      end
    end

    # @return [Hash{Symbol => String}] name => the prefix it is (or will be) installed under
    def prefixes = BUILDS.keys.zip(builds.map(&:prefix)).to_h

    # @return [Hash{String => String}] mklove's name => the static library librdkafka must link
    def archives
      prefixes.flat_map do |name, prefix|
        BUILDS.fetch(name)[:libraries].map { |library, file| [library, File.join(prefix, "lib", file)] }
      end.to_h
    end

    # librdkafka's configure environment: these libraries' headers, archives
    # and pkg-config files first, then whatever the environment adds.
    def configure_env
      dirs = prefixes.values
      {
        "CPPFLAGS" => joined(" ", dirs.map { |dir| "-I#{dir}/include" }, ENV.fetch("CPPFLAGS", nil)),
        "LDFLAGS" => joined(" ", dirs.map { |dir| "-L#{dir}/lib" }, ENV.fetch("LDFLAGS", nil)),
        "PKG_CONFIG_PATH" => joined(":", dirs.map { |dir| "#{dir}/lib/pkgconfig" }, ENV.fetch("PKG_CONFIG_PATH", nil))
      }.merge(archives.transform_keys { |library| "STATIC_LIB_#{library}" })
    end

    private

    # A native build's steps and environment are exactly as they always were (its cache key too).
    def for_target(build)
      return build.values_at(:steps, :env) unless @target.cross?

      cross = build.fetch(:cross).call(@target)
      [build[:steps].merge(cross.fetch(:steps, {})), build[:env].merge(cross.fetch(:env, {}))]
    end

    # The headers, the archives and pkg-config files; each must be there.
    def keep(build)
      [*build[:headers].map { |header| "include/#{header}" }, *build[:libraries].values.map { |file| "lib/#{file}" }, "lib/pkgconfig/*.pc"]
    end

    def joined(separator, ours, theirs) = [*ours, theirs].compact.reject(&:empty?).join(separator)
  end
end
