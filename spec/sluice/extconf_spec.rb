# frozen_string_literal: true

require "open3"
require "digest"
require "tmpdir"

# ext/sluice/extconf.rb refuses to build with a message that says what is
# missing and how to get it (a user's first contact with the gem).
RSpec.describe "ext/sluice/extconf.rb" do
  extconf = File.expand_path("../../ext/sluice/extconf.rb", __dir__)

  # Runs extconf.rb in a scratch directory: [output, success?]. Not with the archives of this machine's
  # ../shared/sources: a found archive is built, where these examples need one missing or refused.
  def configure(extconf, *args, env: {})
    Dir.mktmpdir("sluice-extconf-") do |dir|
      yield dir if block_given?
      output, status = Open3.capture2e({ "SLUICE_SELECTOR" => nil, "SLUICE_SHARED_SOURCES" => dir }.merge(env), RbConfig.ruby, extconf, *args,
                                       chdir: dir)
      [output, status.success?]
    end
  end

  system = { "SLUICE_USE_SYSTEM_LIBRDKAFKA" => "1" }

  it "says when pkg-config is missing (with the system's librdkafka)" do
    output, ok = configure(extconf, "--with-pkg-config=/nonexistent/pkg-config", env: system)
    expect(ok).to be(false)
    expect(output).to include("sluice: pkg-config not found", "apt-get install pkg-config")
  end

  it "says when pkg-config knows no librdkafka" do
    output, ok = configure(extconf, env: system.merge("PKG_CONFIG_PATH" => "/nonexistent", "PKG_CONFIG_LIBDIR" => "/nonexistent"))
    expect(ok).to be(false)
    expect(output).to include("sluice: pkg-config knows no librdkafka", "librdkafka-dev", "PKG_CONFIG_PATH")
  end

  it "refuses librdkafka headers older than 2.0" do
    output, ok = configure(extconf, env: system.merge("PKG_CONFIG_PATH" => "fake")) do |dir|
      FileUtils.mkdir_p(File.join(dir, "fake/include/librdkafka"))
      File.write(File.join(dir, "fake/include/librdkafka/rdkafka.h"), "#define RD_KAFKA_VERSION 0x010903ff\n")
      # An empty archive: mkmf links with pkg-config's Libs before it takes them (where no librdkafka is installed too).
      File.write(File.join(dir, "fake/librdkafka.a"), "!<arch>\n")
      File.write(File.join(dir, "fake/rdkafka.pc"), <<~PC)
        Name: librdkafka
        Description: an old librdkafka
        Version: 1.9.3
        Cflags: -I#{dir}/fake/include
        Libs: -L#{dir}/fake -lrdkafka
      PC
    end
    expect(ok).to be(false)
    expect(output).to include("sluice: librdkafka >= 2.0 required, found 1.9.3")
  end

  it "takes the system's librdkafka with gem install's --use-system-librdkafka too" do
    output, ok = configure(extconf, "--use-system-librdkafka", "--with-pkg-config=/nonexistent/pkg-config")
    expect([ok, output]).to match([false, a_string_including("sluice: pkg-config not found")])
  end

  describe "the bundled librdkafka's archive" do
    pinned = Sluice::LIBRDKAFKA.fetch(:version)

    # A scratch cache: the checkout's build must not answer for these.
    def configure_bundled(extconf, env)
      Dir.mktmpdir("sluice-cache-") { |cache| configure(extconf, env: env.merge("SLUICE_LIBRDKAFKA_CACHE" => cache)) }
    end

    # A pin with a tree unpacks an archive into a scratch directory to compare (nothing of it is used).
    it "is refused when its SHA-256 is not the pinned one, naming both, and nothing is unpacked or used" do
      Dir.mktmpdir do |dir|
        corrupt = File.join(dir, "v#{pinned}.tar.gz")
        File.write(corrupt, "not librdkafka")
        output, ok = configure_bundled(extconf, "SLUICE_LIBRDKAFKA_ARCHIVE" => corrupt)
        expect(ok).to be(false)
        expect(output).to include("is not librdkafka #{pinned} as pinned: its SHA-256 is #{Digest::SHA256.hexdigest("not librdkafka")}",
                                  Sluice::LIBRDKAFKA.fetch(:sha256).values.first,
                                  Sluice::LIBRDKAFKA[:tree] ? "Nothing of it was used" : "Nothing was unpacked")
        expect(output).not_to include("Extracting")
      end
    end

    it "names SLUICE_LIBRDKAFKA_ARCHIVE when the archive cannot be downloaded, and keeps no partial download" do
      Dir.mktmpdir("sluice-cache-") do |cache|
        url = "http://127.0.0.1:1/v#{pinned}.tar.gz" # nothing listens on port 1: as good as no network
        output, ok = configure(extconf, env: { "SLUICE_LIBRDKAFKA_CACHE" => cache, "SLUICE_LIBRDKAFKA_URL" => url })
        expect(ok).to be(false)
        expect(output).to include("could not download #{url}", "#{Sluice::LIBRDKAFKA[:sha256].keys.last} elsewhere and set " \
                                                                  "SLUICE_LIBRDKAFKA_ARCHIVE=/path/to/it", "SLUICE_USE_SYSTEM_LIBRDKAFKA=1")
        expect(Dir.glob("**/*", base: cache).grep(/\.(part|tar\.gz)\z/)).to eq([])
      end
    end

    it "refuses a dependency's archive that is not the pinned one, naming the dependency, before building anything" do
      caches = [ENV.fetch("SLUICE_LIBRDKAFKA_CACHE", nil), File.expand_path("../../tmp/librdkafka", __dir__)].compact
      archives = caches.product(Sluice::LIBRDKAFKA[:sha256].keys).map { |cache, name| File.join(cache, "archives", name) }
      archive = archives.find { |path| File.exist?(path) }
      skip "needs the pinned librdkafka source (bin/setup fetches it)" unless archive
      Dir.mktmpdir do |dir|
        corrupt = File.join(dir, "zlib.tar.gz")
        File.write(corrupt, "not zlib")
        output, ok = configure_bundled(extconf, "SLUICE_LIBRDKAFKA_ARCHIVE" => archive, "SLUICE_ZLIB_ARCHIVE" => corrupt)
        expect(ok).to be(false)
        expect(output).to include("SLUICE_ZLIB_ARCHIVE=#{corrupt} is not zlib #{Sluice::LIBRDKAFKA_DEPENDENCIES.dig(:zlib, :version)} " \
                                  "as pinned", "Nothing was unpacked")
        expect(output).not_to include("building")
      end
    end

    it "refuses an unknown SLUICE_LIBRDKAFKA_GSSAPI before fetching anything" do
      output, ok = configure_bundled(extconf, "SLUICE_LIBRDKAFKA_GSSAPI" => "yes")
      expect([ok, output]).to match([false, a_string_including("SLUICE_LIBRDKAFKA_GSSAPI=yes: expected 0 (without GSSAPI), 1")])
      expect(output).not_to include("downloading")
    end

    it "names the file when SLUICE_LIBRDKAFKA_ARCHIVE points nowhere" do
      output, ok = configure_bundled(extconf, "SLUICE_LIBRDKAFKA_ARCHIVE" => "/nonexistent/librdkafka.tar.gz")
      expect([ok, output]).to match([false, a_string_including("SLUICE_LIBRDKAFKA_ARCHIVE=/nonexistent/librdkafka.tar.gz: no such file")])
    end
  end

  it "says when there is no C compiler, before building anything" do
    Dir.mktmpdir("sluice-path-") do |bin|
      # A machine without build tools: the compiler check comes first and
      # needs no command of the PATH (Ruby runs the shell by its path), so
      # the PATH holds the shell alone. (Linking every command of /usr/bin
      # instead failed on a file that vanished while it was linked.)
      FileUtils.ln_s("/bin/sh", File.join(bin, "sh"))
      output, ok = configure(extconf, env: { "PATH" => bin })
      expect(ok).to be(false)
      expect(output).to include("sluice: no working C compiler", "build-essential", "precompiled gem")
      expect(output).not_to include("building")
    end
  end

  it "refuses an unknown or unavailable SLUICE_SELECTOR before any librdkafka step" do
    Dir.mktmpdir("sluice-cache-") do |cache|
      # An empty cache and no network: a librdkafka step before the check would fail (or build) instead.
      no_librdkafka = { "SLUICE_LIBRDKAFKA_CACHE" => cache, "SLUICE_LIBRDKAFKA_URL" => "http://127.0.0.1:1/librdkafka.tar.gz" }
      output, ok = configure(extconf, env: no_librdkafka.merge("SLUICE_SELECTOR" => "select"))
      expect([ok, output]).to match([false, a_string_including("SLUICE_SELECTOR=select: unknown backend (epoll, kqueue, poll)")])
      unavailable = RUBY_PLATFORM.include?("linux") ? "kqueue" : "epoll"
      output, ok = configure(extconf, env: no_librdkafka.merge("SLUICE_SELECTOR" => unavailable))
      expect([ok, output]).to match([false, a_string_including("SLUICE_SELECTOR=#{unavailable}: not available here")])
      expect(output).not_to include("sluice: librdkafka")
    end
  end
end
