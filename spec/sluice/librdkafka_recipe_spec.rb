# frozen_string_literal: true

require "socket"
require "tmpdir"
require_relative "../../ext/sluice/librdkafka_recipe"

# The librdkafka build's cache (issue 27): a download is named only once
# verified, a wrong file in the cache is not used, and two builds sharing a
# cache take turns. No compiler runs here: the build step itself (cook) and
# reading its result are stubbed; what is under test is the cache around them.
RSpec.describe SluiceBuild::Librdkafka do
  let(:cache) { Dir.mktmpdir("sluice-recipe-") }
  let(:log) { StringIO.new }
  let(:recipe) { described_class.new(cache_root: cache, archive_dirs: [File.join(cache, "archives")], log: log) }
  let(:release_name) { described_class::CHECKSUMS.keys.first }

  after { FileUtils.rm_rf(cache) }

  # An HTTP server on loopback answering every GET with body (the "release archive" of the test).
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
    url = "http://127.0.0.1:#{server.addr[1]}/v#{described_class::VERSION}.tar.gz"
    with_env(described_class::URL_ENV => url, described_class::ARCHIVE_ENV => nil) { yield url }
  ensure
    thread&.kill
    server&.close
  end

  def with_env(vars)
    saved = vars.keys.to_h { |name| [name, ENV.fetch(name, nil)] }
    vars.each { |name, value| value.nil? ? ENV.delete(name) : ENV[name] = value }
    yield
  ensure
    saved.each { |name, value| value.nil? ? ENV.delete(name) : ENV[name] = value }
  end

  it "deletes a download that is not the pinned archive instead of keeping it under the archive's name" do
    serving("<html>a proxy's error page</html>") do
      expect { recipe.build }.to raise_error(described_class::Error, /is not librdkafka .* as pinned/)
    end
    expect(Dir.children(File.join(cache, "archives"))).to be_empty
  end

  it "does not use a wrong file under the archive's name: it downloads, and a wrong download leaves nothing behind" do
    FileUtils.mkdir_p(File.join(cache, "archives"))
    File.write(File.join(cache, "archives", release_name), "an older build's broken download")
    serving("still not it") do
      expect { recipe.build }.to raise_error(described_class::Error, /is not librdkafka .* as pinned/)
    end
    expect(log.string).to include("is not the pinned archive; not used", "downloading")
  end

  it "lets two builds sharing a cache take turns: the second waits and uses the first's build" do
    archive = Dir[File.expand_path("../../tmp/librdkafka/archives/*.orig.tar.gz", __dir__)].first
    skip "needs the pinned librdkafka source (bin/setup fetches it)" unless archive
    cooked = Queue.new
    entered = Queue.new
    release = Queue.new
    first = described_class.new(cache_root: cache, archive_dirs: [File.dirname(archive)], log: StringIO.new)
    allow(first).to receive(:cook) do |_, prefix|
      entered << true
      release.pop # the first build is under way until told otherwise
      FileUtils.mkdir_p(prefix)
      cooked << :first
    end
    allow(first).to receive(:result) { |prefix| prefix }
    second = described_class.new(cache_root: cache, archive_dirs: [File.dirname(archive)], log: log)
    allow(second).to receive(:cook) { cooked << :second }
    allow(second).to receive(:result) { |prefix| prefix }

    with_env(described_class::ARCHIVE_ENV => nil) do
      builder = Thread.new { first.build }
      entered.pop
      waiter = Thread.new { second.build }
      Thread.pass until log.string.include?("waiting for it") || !waiter.alive?
      expect(log.string).to include("another build into", "is under way; waiting for it")
      release << true
      expect([builder.value, waiter.value].uniq.size).to eq(1) # the same build
    end
    expect(Array.new(cooked.size) { cooked.pop }).to eq([:first])
  end
end
