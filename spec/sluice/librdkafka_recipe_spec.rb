# frozen_string_literal: true

require "digest"
require "socket"
require "stringio"
require "tmpdir"
require_relative "../../ext/sluice/librdkafka_recipe"

# The build of librdkafka and its dependencies (ext/sluice/recipe/): archives
# verified before they are used or named, builds kept in the cache by a key
# of all they depend on, failures named. The builds here are of a made-up
# package whose steps are shell commands: no compiler runs.
RSpec.describe "The bundled librdkafka's build" do
  let(:cache) { Dir.mktmpdir("sluice-recipe-") }
  let(:log) { StringIO.new }

  after { FileUtils.rm_rf(cache) }

  # fake-1.0.tar.gz: a source tree of one file, in dir.
  def fake_archive(dir)
    FileUtils.mkdir_p(File.join(dir, "fake-1.0"))
    File.write(File.join(dir, "fake-1.0", "README"), "a fake source\n")
    system("tar", "-czf", "fake-1.0.tar.gz", "fake-1.0", chdir: dir, exception: true)
    File.join(dir, "fake-1.0.tar.gz")
  end

  def fake_pin(archive = nil, urls: [])
    sha256 = archive ? { File.basename(archive) => Digest::SHA256.file(archive).hexdigest } : { "fake-1.0.tar.gz" => "0" * 64 }
    SluiceBuild::Pin.new(name: "fake", title: "Fake", version: "1.0", sha256: sha256, urls: urls)
  end

  # An HTTP server on loopback answering every GET with body.
  def serving(body)
    server = TCPServer.new("127.0.0.1", 0)
    thread = Thread.new do
      loop do
        client = server.accept
        nil while (line = client.gets) && line != "\r\n"
        client.write("HTTP/1.1 200 OK\r\nContent-Length: #{body.bytesize}\r\nConnection: close\r\n\r\n#{body}")
        client.close
      end
    end
    yield "http://127.0.0.1:#{server.addr[1]}/fake-1.0.tar.gz"
  ensure
    thread&.kill
    server&.close
  end

  describe SluiceBuild::Archive do
    let(:archives) { File.join(cache, "archives") }

    def archive_of(pin) = described_class.new(pin, dirs: [archives], download_dir: archives, log: log).path

    it "deletes a download that is not the pinned archive instead of keeping it under the archive's name" do
      serving("<html>a proxy's error page</html>") do |url|
        expect { archive_of(fake_pin(urls: [url])) }.to raise_error(SluiceBuild::Error, /is not Fake 1.0 as pinned: its SHA-256 is/)
      end
      expect(Dir.children(archives)).to be_empty
    end

    it "does not use a wrong file under the archive's name: it downloads, and a wrong download leaves nothing behind" do
      FileUtils.mkdir_p(archives)
      File.write(File.join(archives, "fake-1.0.tar.gz"), "an older build's broken download")
      serving("still not it") do |url|
        expect { archive_of(fake_pin(urls: [url])) }.to raise_error(SluiceBuild::Error, /is not Fake 1.0 as pinned/)
      end
      expect(log.string).to include("is not the pinned archive; not used", "downloading")
    end

    it "tries the pin's URLs in order and keeps the first verified download under its pinned name" do
      Dir.mktmpdir do |dir|
        source = fake_archive(dir)
        serving(File.binread(source)) do |url|
          path = archive_of(fake_pin(source, urls: ["http://127.0.0.1:1/nothing-listens.tar.gz", "#{url}?mirror"]))
          expect(path).to eq(File.join(archives, "fake-1.0.tar.gz"))
          expect(File.binread(path)).to eq(File.binread(source))
        end
      end
      expect(log.string).to include("downloading http://127.0.0.1:1/", "SHA-256 verified: fake-1.0.tar.gz")
      expect(Dir.children(archives)).to eq(["fake-1.0.tar.gz"])
    end

    context "with a pinned tree (an archive whose bytes cannot be pinned: GitHub's of a tag)" do
      def tree_pin(archive, urls: [], tree: SluiceBuild::SourceTree.new(archive).id)
        SluiceBuild::Pin.new(name: "fake", title: "Fake", version: "1.0", sha256: { "fake-1.0.tar.gz" => "0" * 64 }, tree: tree, urls: urls)
      end

      it "accepts an archive that unpacks to the pinned tree, keeping a download under its URL's name" do
        Dir.mktmpdir do |dir|
          source = fake_archive(dir)
          serving(File.binread(source)) do |url|
            path = archive_of(tree_pin(source, urls: [url.sub("fake-1.0.tar.gz", "v1.0.tar.gz")]))
            expect(path).to eq(File.join(archives, "v1.0.tar.gz"))
          end
          expect(archive_of(tree_pin(source, urls: ["http://127.0.0.1:1/v1.0.tar.gz"]))).to eq(File.join(archives, "v1.0.tar.gz")) # found again
        end
        expect(log.string).to include("verified: its git tree #{SluiceBuild::SourceTree.new(File.join(archives, "v1.0.tar.gz")).id}")
      end

      it "refuses one that unpacks to another tree, naming both trees, and keeps nothing" do
        Dir.mktmpdir do |dir|
          source = fake_archive(dir)
          serving(File.binread(source)) do |url|
            expect { archive_of(tree_pin(source, urls: [url], tree: "1" * 40)) }
              .to raise_error(SluiceBuild::Error, /0{64} \(fake-1.0.tar.gz\), or an archive of git tree 1{40} \(it unpacked to \h{40}\)/)
          end
        end
        expect(Dir.children(archives)).to be_empty
      end
    end

    it "names the setting that points at an archive when none can be downloaded" do
      pin = fake_pin(urls: ["http://127.0.0.1:1/fake-1.0.tar.gz"])
      expect { archive_of(pin) }.to raise_error(SluiceBuild::Error, %r{could not download http://127.0.0.1:1/fake-1.0.tar.gz .*SLUICE_FAKE_ARCHIVE=})
      expect(Dir.children(archives)).to be_empty
    end
  end

  describe SluiceBuild::SourceTree do
    it "is the id git gives the tree an archive unpacks to: files, executables, links, directories, no empty ones" do
      skip "needs git to compare with" unless system("git", "--version", out: File::NULL)
      Dir.mktmpdir do |dir|
        top = File.join(dir, "fake-1.0")
        FileUtils.mkdir_p([File.join(top, "src", "sub"), File.join(top, "empty"), File.join(top, "src.d")])
        File.write(File.join(top, "src", "a.c"), "int a;\n")
        File.write(File.join(top, "src", "sub", "b.c"), "int b;\n")
        File.write(File.join(top, "src.d", "c"), "c\n") # sorts before src/ in git's order, after src as a name
        File.write(File.join(top, "configure"), "#!/bin/sh\n")
        File.chmod(0o755, File.join(top, "configure"))
        File.symlink("src/a.c", File.join(top, "link"))
        system("tar", "-czf", "fake.tar.gz", "fake-1.0", chdir: dir, exception: true)
        system("git", "init", "-q", chdir: top, exception: true)
        system("git", "add", "-A", chdir: top, exception: true)
        expected = IO.popen(%w[git write-tree], chdir: top, &:read).strip
        expect(described_class.new(File.join(dir, "fake.tar.gz")).id).to eq(expected)
      end
    end
  end

  describe SluiceBuild::CachedBuild do
    let(:sources) { Dir.mktmpdir("sluice-sources-") }
    let(:archive) { fake_archive(sources) }
    let(:install) { [["sh", "-c", "mkdir -p {prefix}/lib {prefix}/share && cp README {prefix}/lib/libfake.a && touch {prefix}/share/junk"]] }

    after { FileUtils.rm_rf(sources) }

    def cached(steps, pin: fake_pin(archive), log: self.log)
      described_class.new(pin, cache_root: cache, archive_dirs: [sources], log: log, steps: steps, keep: %w[lib/*.a], needs: "a shell")
    end

    it "builds once, keeps only what it is told to, and builds nothing the second time" do
      prefix = cached({ install: install }).build
      expect(Dir.glob("**/*", base: prefix).sort).to eq(%w[lib lib/libfake.a sluice-build.done])
      expect(Dir.glob(File.join(cache, "*.work.*"))).to eq([]) # the work directory went with the build
      expect(cached({ install: install }, log: log).build).to eq(prefix)
      expect(log.string).to include("Fake 1.0: using the build in #{prefix}").and match(/Fake 1.0: built in \d+ s \(\d+ s of CPU\) into /)
    end

    it "keys the build by its steps and version: a changed pin or step builds anew beside the old build" do
      prefixes = [cached({ install: install }), cached({ install: install + [%w[true]] }),
                  cached({ install: install }, pin: fake_pin(archive).tap { |pin| pin.version = "1.1" })].map(&:prefix)
      expect(prefixes.uniq.size).to eq(3)
      expect(prefixes.last).to include("fake-1.1-")
    end

    it "names the package, the step that failed, its log and what the build needs, and keeps nothing" do
      failing = { configure: [["sh", "-c", "echo 'checking for a thing... no'; exit 3"]], install: install }
      build = cached(failing)
      message = nil
      expect { build.build }.to raise_error(SluiceBuild::Error) { |error| message = error.message }
      expect(message).to start_with("building Fake 1.0 failed: its configure step failed; the log: ")
      expect(message).to include("It needs a shell", "SLUICE_USE_SYSTEM_LIBRDKAFKA=1")
      expect(File.read(message[/the log: (\S+configure\.log)/, 1])).to include("checking for a thing... no")
      expect(File.exist?(build.prefix)).to be(false)
      expect(build.built?).to be(false)
    end

    it "refuses an install that left out what it must keep" do
      expect { cached({ install: [%w[true]] }).build }.to raise_error(SluiceBuild::Error, %r{its install left no lib/\*\.a})
    end

    it "lets two builds sharing a cache take turns: the second waits and uses the first's build" do
      cooked = Queue.new
      entered = Queue.new
      release = Queue.new
      first = cached({ install: install }, log: StringIO.new)
      allow(first).to receive(:cook) do
        entered << true
        release.pop # the first build is under way until told otherwise
        FileUtils.mkdir_p(first.prefix)
        cooked << :first
      end
      second = cached({ install: install })
      allow(second).to receive(:cook) { cooked << :second }

      builder = Thread.new { first.build }
      entered.pop
      waiter = Thread.new { second.build }
      Thread.pass until log.string.include?("waiting for it") || !waiter.alive?
      expect(log.string).to include("another build into", "is under way; waiting for it")
      release << true
      expect([builder.value, waiter.value].uniq.size).to eq(1) # the same build
      expect(Array.new(cooked.size) { cooked.pop }).to eq([:first])
    end
  end

  describe SluiceBuild::Librdkafka do
    # Every build stubbed: what is under test is which prefix each gets.
    def prefixes_built
      built = []
      allow_any_instance_of(SluiceBuild::CachedBuild).to receive(:archive).and_return(nil)
      allow_any_instance_of(SluiceBuild::CachedBuild).to receive(:build) { |build| build.prefix.tap { |prefix| built << prefix } }
      allow_any_instance_of(described_class).to receive(:result) { |_, prefix| prefix }
      described_class.new(cache_root: cache, log: log).build
      built.map { |prefix| File.basename(prefix) }
    end

    it "builds the release SLUICE_LIBRDKAFKA_VERSION names, beside the pinned one, with that release's own patches" do
      other = Sluice::LIBRDKAFKA_OPT_IN.keys.first
      default = prefixes_built.last
      stub_const("ENV", ENV.to_h.merge("SLUICE_LIBRDKAFKA_VERSION" => other))
      expect(prefixes_built.last).to start_with("librdkafka-#{other}-")
      own = described_class.patches(other).map { |path| path.split("/").last(2).join("/") }
      expect(own).to include("librdkafka-#{other}/0004-consumer-close-always-leaves-group.patch",
                             "librdkafka/0001-consumer-no-parse-buffer-without-headers.patch")
      expect(own.map { |path| File.basename(path) }).to eq(described_class.patches(Sluice::LIBRDKAFKA[:version]).map { |path| File.basename(path) })
      expect(default).to start_with("librdkafka-#{Sluice::LIBRDKAFKA[:version]}-")
    end

    it "refuses a release that is not pinned, naming those that are, before building anything" do
      stub_const("ENV", ENV.to_h.merge("SLUICE_LIBRDKAFKA_VERSION" => "2.13.0"))
      expect { prefixes_built }.to raise_error(SluiceBuild::Error, /SLUICE_LIBRDKAFKA_VERSION=2.13.0: not a pinned release \(2.15.0, 2.14.2\)/)
    end

    it "pins 2.15.0 by the tree its tag names: the archive in ../shared/sources unpacks to it" do
      archive = File.expand_path("../../../shared/sources/librdkafka-2.15.0.tar.gz", __dir__)
      skip "needs #{archive} (this project's machines)" unless File.file?(archive)
      expect(SluiceBuild::SourceTree.new(archive).id).to eq(Sluice::LIBRDKAFKA[:tree])
    end

    it "builds zlib, zstd and OpenSSL first, and keys librdkafka's build by their versions" do
      before = prefixes_built
      expect(before.map { |name| name[/\A[a-z]+/] }).to eq(%w[zlib zstd openssl librdkafka])
      pins = Sluice::LIBRDKAFKA_DEPENDENCIES.merge(zstd: Sluice::LIBRDKAFKA_DEPENDENCIES[:zstd].merge(version: "1.5.8"))
      stub_const("Sluice::LIBRDKAFKA_DEPENDENCIES", pins)
      after = prefixes_built
      expect(after[1]).to start_with("zstd-1.5.8-")
      expect(after.values_at(0, 2)).to eq(before.values_at(0, 2)) # zlib's and OpenSSL's builds are still good
      expect(after.last).not_to eq(before.last)
    end

    it "builds MIT Kerberos, then Cyrus SASL on it, only with SLUICE_LIBRDKAFKA_GSSAPI=static, and librdkafka anew with them" do
      without = prefixes_built
      stub_const("ENV", ENV.to_h.merge("SLUICE_LIBRDKAFKA_GSSAPI" => "static"))
      with = prefixes_built
      expect(with.map { |name| name[/\A[a-z_0-9]+(?=-)/] }).to eq(%w[zlib zstd openssl krb5 cyrus_sasl librdkafka])
      expect(with.first(3)).to eq(without.first(3)) # the other builds are shared
      expect(with.last).not_to eq(without.last)
    end

    it "with GSSAPI built in, links the Kerberos archives after libsasl2.a: by path on librdkafka's LIBS" do
      dependencies = SluiceBuild::Dependencies.new(cache_root: cache, archive_dirs: [], log: log, gssapi: true)
      env = dependencies.configure_env
      krb5 = dependencies.prefixes.fetch(:krb5)
      expect(env["STATIC_LIB_libsasl2"]).to eq(File.join(dependencies.prefixes.fetch(:cyrus_sasl), "lib", "libsasl2.a"))
      kerberos = %w[libgssapi_krb5 libkrb5 libk5crypto libcom_err libkrb5support].map { |lib| "#{krb5}/lib/#{lib}.a" }
      expect(env["LIBS"].split).to eq(kerberos + ["-lresolv"])
      sasl = dependencies.builds.find { |build| build.prefix.include?("cyrus_sasl") }
      expect(sasl.instance_variable_get(:@steps)[:configure].flatten).to include("--enable-gssapi=#{krb5}")
      expect(SluiceBuild::Dependencies.new(cache_root: cache, archive_dirs: [], log: log).configure_env).not_to include("LIBS")
    end

    it "points librdkafka's configure at exactly the archives built for it" do
      env = SluiceBuild::Dependencies.new(cache_root: cache, archive_dirs: [], log: log).configure_env
      expect(env.keys).to include("CPPFLAGS", "LDFLAGS", "PKG_CONFIG_PATH", "STATIC_LIB_zlib", "STATIC_LIB_libzstd", "STATIC_LIB_libssl",
                                  "STATIC_LIB_libcrypto")
      expect(env.select { |name, _| name.start_with?("STATIC_LIB_") }.values).to all(start_with(cache).and(end_with(".a")))
    end
  end
end
