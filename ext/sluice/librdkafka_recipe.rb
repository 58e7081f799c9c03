# frozen_string_literal: true

require "digest"
require "etc"
require "fileutils"
require_relative "../../lib/sluice/version"

module SluiceBuild
  # Builds the pinned librdkafka (Sluice::LIBRDKAFKA) from its release
  # archive with mini_portile2 and says how to link it into the extension:
  # librdkafka.a itself, and its dependencies (OpenSSL, zstd, zlib) statically
  # where this system has their static libraries, as librdkafka's own
  # configure found them. The archive is checked against the pinned SHA-256
  # before anything is unpacked. Each build is kept under cache_root, keyed by
  # version and options, so a second extconf run does not build again.
  class Librdkafka
    VERSION = Sluice::LIBRDKAFKA.fetch(:version)
    CHECKSUMS = Sluice::LIBRDKAFKA.fetch(:sha256)
    RELEASE_URL = "https://github.com/confluentinc/librdkafka/archive/refs/tags/v#{VERSION}.tar.gz".freeze
    ARCHIVE_ENV = "SLUICE_LIBRDKAFKA_ARCHIVE"
    URL_ENV = "SLUICE_LIBRDKAFKA_URL" # a mirror of the release archive

    # Features built in: the compressions, SSL, SASL PLAIN/SCRAM/OAUTHBEARER.
    # No libcurl (OIDC token fetching), the bundled lz4. GSSAPI (Kerberos)
    # needs Cyrus SASL, which is linked dynamically: by default built in where
    # its headers are installed (configure's "try"); SLUICE_LIBRDKAFKA_GSSAPI=0
    # leaves it out (the precompiled gem, which must load on a bare system),
    # =1 requires it.
    CONFIGURE = %w[--enable-static --enable-ssl --enable-zstd --disable-lz4-ext --disable-curl --disable-syslog].freeze
    GSSAPI_ENV = "SLUICE_LIBRDKAFKA_GSSAPI"
    GSSAPI = { "" => [], "0" => %w[--disable-gssapi], "1" => %w[--enable-gssapi] }.freeze

    # Changes to librdkafka's source, applied in name order before configure
    # (each says why in its header; each belongs upstream).
    PATCHES = Dir[File.join(__dir__, "patches", "librdkafka", "*.patch")].sort.freeze

    Result = Struct.new(:include_dir, :archive, :libs, :built_with, keyword_init: true)

    class Error < StandardError; end

    # @param cache_root [String] where builds and downloaded archives are kept
    # @param archive_dirs [Array<String>] where to look for an archive before downloading
    def initialize(cache_root:, archive_dirs: [], log: $stdout)
      @cache_root = cache_root
      @archive_dirs = archive_dirs
      @log = log
    end

    # @return [Result]
    # @raise [Error] with what to do about it
    def build
      configure_options # refuses an unknown GSSAPI setting before anything is downloaded
      prefix = File.join(@cache_root, "#{VERSION}-#{options_digest}")
      done = File.join(prefix, "sluice-build.done")
      exclusively(prefix) do
        if File.exist?(done)
          say "librdkafka #{VERSION}: using the build in #{prefix}"
        else
          cook(archive, prefix)
          File.write(done, Time.now.utc.to_s)
        end
      end
      result(prefix)
    end

    private

    def say(text) = @log.puts("sluice: #{text}")

    # Two builds sharing one cache (two `rake compile`s, a gem install beside
    # a checkout) take turns: the second waits for the first and then uses
    # its build, instead of deleting the first's work under it. An flock:
    # released by the system if the holder dies.
    def exclusively(prefix)
      FileUtils.mkdir_p(File.dirname(prefix))
      File.open("#{prefix}.lock", File::RDWR | File::CREAT, 0o644) do |lock|
        unless lock.flock(File::LOCK_EX | File::LOCK_NB)
          say "librdkafka #{VERSION}: another build into #{prefix} is under way; waiting for it"
          lock.flock(File::LOCK_EX)
        end
        yield
      end
    end

    def configure_options
      setting = ENV.fetch(GSSAPI_ENV, "")
      CONFIGURE + GSSAPI.fetch(setting) { raise Error, "#{GSSAPI_ENV}=#{setting}: expected 0 (without GSSAPI) or 1 (with it)" }
    end

    def options_digest
      patches = PATCHES.map { |path| Digest::SHA256.file(path).hexdigest }
      inputs = [configure_options, RbConfig::CONFIG["CC"], ENV.fetch("CC", ""), ENV.fetch("CFLAGS", ""), *patches]
      Digest::SHA256.hexdigest(inputs.join("\n"))[0, 12]
    end

    # The archive to build from, verified: SLUICE_LIBRDKAFKA_ARCHIVE, else one
    # found in archive_dirs, else the release archive downloaded.
    def archive
      given = ENV.fetch(ARCHIVE_ENV, "")
      return verified(given, "#{ARCHIVE_ENV}=#{given}") unless given.empty?

      candidates = @archive_dirs.flat_map { |dir| CHECKSUMS.keys.map { |name| File.join(dir, name) } }.select { |path| File.file?(path) }
      found = candidates.find do |path|
        pinned?(path).tap { |ok| say "librdkafka #{VERSION}: #{path} is not the pinned archive; not used" unless ok }
      end
      return verified(found, found) if found

      download
    end

    def pinned?(path) = CHECKSUMS.value?(Digest::SHA256.file(path).hexdigest)

    def url = ENV.fetch(URL_ENV, "").then { |given| given.empty? ? RELEASE_URL : given }

    def verified(path, source)
      raise Error, "#{source}: no such file" unless File.file?(path)

      actual = Digest::SHA256.file(path).hexdigest
      known = CHECKSUMS.key(actual)
      unless known
        raise Error, "#{source} is not librdkafka #{VERSION} as pinned: its SHA-256 is #{actual}, expected one of " \
                     "#{CHECKSUMS.map { |name, sum| "#{sum} (#{name})" }.join(", ")}. Nothing was unpacked."
      end
      say "librdkafka #{VERSION}: #{source} (SHA-256 verified: #{known})"
      path
    end

    # The download gets the archive's name only once verified: a wrong one
    # (a proxy's error page, a mirror's other release) is deleted, never kept
    # for every later build to fail on.
    def download
      require "net/http"
      path = File.join(@cache_root, "archives", "v#{VERSION}.tar.gz") # replaces a wrong one of that name
      FileUtils.mkdir_p(File.dirname(path))
      part = "#{path}.part.#{Process.pid}"
      say "librdkafka #{VERSION}: downloading #{url}"
      begin
        fetch(URI(url), part)
      rescue StandardError => e
        raise Error, "could not download #{url} (#{e.class}: #{e.message}). Without network, download it " \
                     "elsewhere and set #{ARCHIVE_ENV}=/path/to/v#{VERSION}.tar.gz (Debian's librdkafka_#{VERSION}.orig.tar.gz " \
                     "works too), or build against the system's librdkafka with SLUICE_USE_SYSTEM_LIBRDKAFKA=1"
      end
      verified(part, url)
      File.rename(part, path)
      path
    ensure
      FileUtils.rm_f(part) if part
    end

    def fetch(uri, path, redirects = 5)
      Net::HTTP.start(uri.host, uri.port, use_ssl: uri.scheme == "https", open_timeout: 30, read_timeout: 60) do |http|
        http.request(Net::HTTP::Get.new(uri)) do |response|
          case response
          when Net::HTTPRedirection
            raise "too many redirects" if redirects.zero?

            return fetch(URI(response["location"]), path, redirects - 1)
          when Net::HTTPSuccess then File.open(path, "wb") { |file| response.read_body { |chunk| file.write(chunk) } }
          else raise "HTTP #{response.code}"
          end
        end
      end
    end

    def cook(archive, prefix)
      recipe = Recipe.new(archive, prefix, configure_options)
      say "librdkafka #{VERSION}: building (configure #{configure_options.join(" ")}; make -j#{recipe.jobs}); logs under #{recipe.work_root}"
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      recipe.cook_here
      say format("librdkafka %s: built in %.0f s into %s", VERSION, Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, prefix)
    rescue RuntimeError => e
      FileUtils.rm_rf(prefix) # nothing half-built stays to be mistaken for a build
      raise Error, "building librdkafka #{VERSION} failed: #{e.message} (see the logs under #{recipe&.work_root}). " \
                   "It needs a C compiler, make, and the headers of OpenSSL, zlib and zstd (Debian: libssl-dev " \
                   "zlib1g-dev libzstd-dev); SLUICE_USE_SYSTEM_LIBRDKAFKA=1 uses an installed librdkafka instead"
    end

    # What to link: librdkafka.a, then its dependencies as librdkafka's
    # configure resolved them (-Wl,-Bstatic around those it found static).
    def result(prefix)
      config = File.read(File.join(prefix, "sluice-Makefile.config"))
      libs = config[/^LIBS\+?=\s*(.*)$/, 1].to_s.strip
      built_with = config[/^BUILT_WITH\+?=\s*(.*)$/, 1].to_s.split
      Result.new(include_dir: File.join(prefix, "include"), archive: File.join(prefix, "lib", "librdkafka.a"),
                 libs: libs, built_with: built_with)
    end
  end

  # mini_portile2's steps for librdkafka: its configure is mklove (not
  # autoconf), and only the C library is built and installed.
  class Recipe
    attr_reader :jobs, :work_root

    def initialize(archive, prefix, configure_options)
      begin
        require "mini_portile2"
      rescue LoadError
        raise Librdkafka::Error, "building librdkafka needs the mini_portile2 gem (gem install mini_portile2; Debian: " \
                                 "ruby-mini-portile2), or SLUICE_USE_SYSTEM_LIBRDKAFKA=1 for an installed librdkafka"
      end
      @archive = archive
      @prefix = prefix
      @configure_options = configure_options
      @work_root = "#{prefix}.work.#{Process.pid}" # its own, whatever else builds from this cache
      @jobs = Integer(ENV.fetch("SLUICE_LIBRDKAFKA_JOBS", Etc.nprocessors.to_s))
    end

    def cook_here
      FileUtils.rm_rf(@work_root)
      FileUtils.mkdir_p(@work_root)
      portile = portile_class.new("librdkafka", Librdkafka::VERSION)
      portile.files = [{ url: "file://#{File.expand_path(@archive)}", sha256: Digest::SHA256.file(@archive).hexdigest }]
      portile.target = @work_root
      portile.configure_options = ["--prefix=#{@prefix}", *@configure_options]
      portile.patch_files = Librdkafka::PATCHES
      portile.jobs = @jobs
      Dir.chdir(@work_root) do # mini_portile2 unpacks under ./tmp
        portile.cook
        FileUtils.cp(portile.makefile_config, File.join(@prefix, "sluice-Makefile.config"))
      end
      FileUtils.rm_rf(@work_root)
      prune
    end

    # Only what the extension links stays: librdkafka.a and the headers. The
    # shared library, the bundle of librdkafka with its dependencies
    # (librdkafka-static.a) and pkg-config files were 43 of the 68 MB a build
    # kept, in a checkout's cache and in every installed source gem.
    def prune
      lib = File.join(@prefix, "lib")
      FileUtils.rm_rf(Dir[File.join(lib, "librdkafka*.so*"), File.join(lib, "librdkafka-static.a"), File.join(lib, "pkgconfig")])
    end

    private

    def portile_class
      Class.new(MiniPortile) do
        attr_writer :jobs

        # mklove: no --host; our own --prefix (the cache)
        def computed_options = configure_options

        def compile = execute("compile", [make_cmd, "-C", "src", "-j#{@jobs}"])

        def install = execute("install", [make_cmd, "-C", "src", "install"])

        def makefile_config = File.expand_path(File.join(work_path, "Makefile.config"))
      end
    end
  end
end
