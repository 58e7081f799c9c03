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
    KRB5_OPTIONS = %w[--prefix={prefix} --sysconfdir=/etc --localstatedir=/var --enable-static --disable-shared --disable-rpath
                      --disable-nls --disable-pkinit --with-crypto-impl=builtin --with-tls-impl=no --without-ldap --without-keyutils
                      --without-libedit --without-readline --without-lmdb --without-system-verto].freeze
    SASL_OPTIONS = %w[--prefix={prefix} --sysconfdir=/etc --enable-static --disable-shared --with-plugindir=/usr/lib/sasl2
                      --with-configdir=/etc/sasl2 --with-gss_impl=mit --disable-anon --disable-cram --disable-digest --disable-scram
                      --disable-otp --disable-plain --disable-login --disable-ntlm --disable-srp --disable-passdss --disable-sample
                      --disable-checkapop --disable-sql --disable-macos-framework --with-dblib=none --without-saslauthd
                      --without-authdaemond --without-pwcheck --without-openssl --without-des --without-ldap].freeze
    # MIT Kerberos's sources are under src/.
    KRB5_CONFIGURE = ["sh", "-c", 'cd src && exec ./configure "$@"', "configure", *KRB5_OPTIONS].freeze
    SASL_CONFIGURE = ["./configure", *SASL_OPTIONS, "--enable-gssapi={krb5}"].freeze
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
      },
      # GSSAPI's two, only with SLUICE_LIBRDKAFKA_GSSAPI=static. MIT Kerberos's client libraries (no KDC,
      # admin tools or plugins to load), with its own cryptography (no second OpenSSL to link), reading
      # the system's /etc/krb5.conf and credential caches as Debian's does.
      krb5: {
        title: "MIT Kerberos",
        gssapi: true,
        libraries: { "gssapi_krb5" => "libgssapi_krb5.a", "krb5" => "libkrb5.a", "k5crypto" => "libk5crypto.a",
                     "com_err" => "libcom_err.a", "krb5support" => "libkrb5support.a" }, # in link order
        headers: %w[gssapi.h gssapi/*.h krb5.h krb5/*.h com_err.h profile.h],
        pkgconfig: false,
        needs: "a C compiler, make and awk",
        env: { "CFLAGS" => "-O2 -fPIC" },
        steps: {
          configure: [KRB5_CONFIGURE],
          compile: [%w[{make} -C src/util -j{jobs}], %w[{make} -C src/include], %w[{make} -C src/lib/crypto -j{jobs}],
                    %w[{make} -C src/lib/krb5 -j{jobs}], %w[{make} -C src/lib/gssapi -j{jobs}]],
          install: [%w[{make} -C src install-mkdirs], %w[{make} -C src/include install], %w[{make} -C src/util/et install],
                    %w[{make} -C src/util/support install], %w[{make} -C src/lib/crypto install],
                    %w[{make} -C src/lib/krb5 install], %w[{make} -C src/lib/gssapi install]]
        },
        # What its configure would run on this machine to find out, given: true of glibc and GCC on Linux.
        cross: lambda do |target|
          { steps: { configure: [[*KRB5_CONFIGURE, "--host=#{target.triplet}", "krb5_cv_attr_constructor_destructor=yes,yes",
                                  "ac_cv_func_regcomp=yes", "ac_cv_printf_positional=yes"]] },
            env: target.tools_env }
        end
      },
      # Cyrus SASL with only its GSSAPI and GS2-KRB5 mechanisms, built into libsasl2.a (no plugins
      # looked for on the system, no database), on the Kerberos above. Only the library is built: the
      # rest of the tree needs files that Debian's repack leaves out.
      cyrus_sasl: {
        title: "Cyrus SASL",
        gssapi: true,
        libraries: { "libsasl2" => "libsasl2.a" },
        headers: %w[sasl/*.h],
        needs: "a C compiler and make",
        env: ->(prefixes) { gss_env(prefixes.fetch(:krb5)) },
        steps: {
          configure: [SASL_CONFIGURE],
          compile: [%w[{make} -C common libplugin_common.la], %w[{make} -C lib linksrcs], %w[{make} -C lib -j{jobs} libsasl2.a]],
          install: [%w[install -D -m644 lib/.libs/libsasl2.a {prefix}/lib/libsasl2.a],
                    %w[install -D -m644 libsasl2.pc {prefix}/lib/pkgconfig/libsasl2.pc],
                    %w[install -D -m644 -t {prefix}/include/sasl include/sasl.h include/saslplug.h include/saslutil.h
                       include/prop.h include/hmac-md5.h include/md5.h include/md5global.h]]
        },
        # Its SPNEGO check runs a program: true of the Kerberos above, as it finds natively.
        cross: lambda do |target|
          { steps: { configure: [[*SASL_CONFIGURE, "--host=#{target.triplet}", "ac_cv_gssapi_supports_spnego=yes"]] },
            env: target.tools_env }
        end
      }
    }.freeze
    OWN_FLAGS = { "CFLAGS" => nil, "CPPFLAGS" => nil, "LDFLAGS" => nil }.freeze

    # @param gssapi [Boolean] with MIT Kerberos and Cyrus SASL (SLUICE_LIBRDKAFKA_GSSAPI=static)
    def self.pins(gssapi: false)
      BUILDS.reject { |_, build| build[:gssapi] && !gssapi }
            .to_h { |name, build| [name, Pin.new(name: name.to_s, title: build[:title], **Sluice::LIBRDKAFKA_DEPENDENCIES.fetch(name))] }
    end

    # What Cyrus SASL's configure needs to find and link the static Kerberos
    # libraries: all of them, in link order (its checks name only the first
    # four), and the resolver, which Kerberos uses to find a realm's KDCs.
    # By -l: libtool would copy an archive named by its path into libsasl2.a.
    def self.gss_env(krb5)
      libraries = BUILDS.fetch(:krb5)[:libraries].keys.map { |name| "-l#{name}" }
      { "CFLAGS" => "-O2 -fPIC", "CPPFLAGS" => "-I#{krb5}/include", "LDFLAGS" => "-L#{krb5}/lib", "LIBS" => [*libraries, "-lresolv"].join(" ") }
    end

    def initialize(cache_root:, archive_dirs:, log:, target: Target.current, gssapi: false)
      @cache_root = cache_root
      @archive_dirs = archive_dirs
      @log = log
      @target = target
      @gssapi = gssapi
    end

    # @return [Array<String>] "zlib 1.3.1", ...
    def labels = pins.values.map(&:label)

    # @return [Array<CachedBuild>] one per dependency, in build order; a
    # build's steps and environment may name an earlier one's prefix
    # ({krb5}), which is then part of its cache key
    def builds
      @builds ||= pins.each_with_object({}) do |(name, pin), built|
        steps, env = for_target(BUILDS.fetch(name), built.transform_values(&:prefix))
        built[name] = CachedBuild.new(pin, cache_root: @cache_root, archive_dirs: @archive_dirs, log: @log, steps: steps,
                                           env: OWN_FLAGS.merge(env), keep: keep(BUILDS.fetch(name)), needs: BUILDS.fetch(name)[:needs])
      end.values
    end

    # @return [Hash{Symbol => String}] name => the prefix it is (or will be) installed under
    def prefixes = pins.keys.zip(builds.map(&:prefix)).to_h

    # @return [Hash{String => String}] mklove's name => the static library librdkafka must link
    def archives
      prefixes.flat_map do |name, prefix|
        BUILDS.fetch(name)[:libraries].map { |library, file| [library, File.join(prefix, "lib", file)] }
      end.to_h
    end

    # librdkafka's configure environment: these libraries' headers, archives
    # and pkg-config files first, then whatever the environment adds. With
    # GSSAPI, the Kerberos archives go last on its LIBS (mklove links
    # libsasl2.a as it is told; what libsasl2.a needs it cannot know).
    def configure_env
      dirs = prefixes.values
      env = {
        "CPPFLAGS" => joined(" ", dirs.map { |dir| "-I#{dir}/include" }, ENV.fetch("CPPFLAGS", nil)),
        "LDFLAGS" => joined(" ", dirs.map { |dir| "-L#{dir}/lib" }, ENV.fetch("LDFLAGS", nil)),
        "PKG_CONFIG_PATH" => joined(":", dirs.map { |dir| "#{dir}/lib/pkgconfig" }, ENV.fetch("PKG_CONFIG_PATH", nil))
      }.merge(archives.transform_keys { |library| "STATIC_LIB_#{library}" })
      return env unless @gssapi

      env.merge("LIBS" => joined(" ", [gss_libs], ENV.fetch("LIBS", nil)))
    end

    private

    def pins = @pins ||= self.class.pins(gssapi: @gssapi)

    # librdkafka's link of libsasl2.a, after it: the Kerberos archives by path.
    def gss_libs
      krb5 = prefixes.fetch(:krb5)
      [*BUILDS.fetch(:krb5)[:libraries].values.map { |file| File.join(krb5, "lib", file) }, "-lresolv"].join(" ")
    end

    # A native build's steps and environment are exactly as they always were
    # (its cache key too); {krb5} in a step is that build's prefix.
    def for_target(build, prefixes)
      env = build[:env].respond_to?(:call) ? build[:env].call(prefixes) : build[:env]
      steps = build[:steps]
      if @target.cross?
        cross = build.fetch(:cross).call(@target)
        steps = steps.merge(cross.fetch(:steps, {}))
        env = env.merge(cross.fetch(:env, {}))
      end
      [steps.transform_values { |commands| commands.map { |command| command.map { |arg| arg.gsub("{krb5}") { prefixes.fetch(:krb5) } } } }, env]
    end

    # The headers, the archives and pkg-config files; each must be there.
    def keep(build)
      [*build[:headers].map { |header| "include/#{header}" }, *build[:libraries].values.map { |file| "lib/#{file}" },
       *("lib/pkgconfig/*.pc" if build.fetch(:pkgconfig, true))]
    end

    def joined(separator, ours, theirs) = [*ours, theirs].compact.reject(&:empty?).join(separator)
  end
end
