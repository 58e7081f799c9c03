# frozen_string_literal: true

require "rubygems/package"
require "tmpdir"

# The source gem as users get it: built from sluice.gemspec, installed (its
# extension compiled by RubyGems, the pinned librdkafka and its dependencies
# built from their archives and linked in) into a temporary GEM_HOME, then
# used from a directory outside the checkout. Takes a few minutes of compiling
# (OpenSSL most of them), so it runs when asked: .ci/run sets SLUICE_GEM_SPEC=1.
# The installed gems it may use (mini_portile2, a build dependency) are the
# system's; the source archives are the ones bin/setup fetched (these
# machines have no GitHub access).
RSpec.describe "The source gem", :kafka, timeout: 900,
                                         skip: ENV["SLUICE_GEM_SPEC"] != "1" && "SLUICE_GEM_SPEC=1 builds and installs it (.ci/run)" do
  before(:context) do
    @dir = Dir.mktmpdir("sluice-gem-")
    @gem_home = File.join(@dir, "gem_home")
    env = { "GEM_HOME" => @gem_home, "GEM_PATH" => [@gem_home, *Gem.path].join(File::PATH_SEPARATOR) }
    { librdkafka: Sluice::LIBRDKAFKA, **Sluice::LIBRDKAFKA_DEPENDENCIES }.each do |name, pin|
      archive = pin[:sha256].keys.map { |file| File.join(Packaging::ROOT, "tmp/librdkafka/archives", file) }.find { |path| File.exist?(path) }
      env["SLUICE_#{name.upcase}_ARCHIVE"] = archive if archive
    end
    package = File.join(@dir, "sluice.gem")
    Packaging.run(env, "gem", "build", "sluice.gemspec", "--output", package, chdir: Packaging::ROOT)
    @files = Gem::Package.new(package).contents
    Packaging::INSTALL_TIMES["source gem (librdkafka built at install)"] = Packaging.timed do
      Packaging.run(env, "gem", "install", "--local", "--no-document", package, chdir: @dir)
    end
    installed = Dir[File.join(@gem_home, "gems", "sluice-*", "**", "*")]
    @installed_mb = installed.sum { |path| File.file?(path) ? File.size(path) : 0 } / 1_048_576.0
    @build_tree_mb = installed.grep(%r{/tmp/librdkafka/}).sum { |path| File.file?(path) ? File.size(path) : 0 } / 1_048_576.0
    script = Packaging.round_trip_script(TestKafka::BROKERS, "sluice-spec-gem", 1_000)
    @outcome = JSON.parse(Packaging.run(env, RbConfig.ruby, "-e", script, chdir: @dir).lines.last)
  end

  after(:context) { FileUtils.rm_rf(@dir) if @dir }

  it "holds lib/, exe/sluice, ext/ (with the librdkafka patches), README, LICENSE and CHANGELOG, and no specs, build outputs or temporary files" do
    patches = Dir[File.join(Packaging::ROOT, "ext/sluice/patches/librdkafka/*.patch")].map { |path| path.delete_prefix("#{Packaging::ROOT}/") }
    expect(patches).not_to be_empty
    expect(@files).to include("lib/sluice.rb", "lib/sluice/cli.rb", "exe/sluice", "ext/sluice/extconf.rb", "ext/sluice/selector.c",
                              "README.md", "LICENSE", "CHANGELOG.md", *patches)
    expect(@files).to all(match(%r{\A(lib/|ext/sluice/)|\A(exe/sluice|README\.md|LICENSE|CHANGELOG\.md)\z}))
    expect(@files.grep(/\.(so|bundle|o)\z|Makefile|mkmf\.log|\Aspec|\Atmp/)).to eq([])
  end

  # 110 MB before issue 27, 72 of them librdkafka's build. The extension links the builds' archives in
  # whole, so an installed gem needs none of them: `make install` removes tmp/librdkafka (extconf.rb's
  # $sluice_prune). (This example used to allow 45 MB of them, which a pruned tree met at 0.)
  it "keeps nothing of the builds of librdkafka and its dependencies once the extension is linked" do
    RSpec.configuration.reporter.message(format("    installed source gem: %.1f MB, of which the builds %.1f MB", @installed_mb,
                                                @build_tree_mb))
    expect(Dir[File.join(@gem_home, "gems", "sluice-*", "tmp", "librdkafka")]).to eq([])
    expect(@build_tree_mb).to eq(0)
    # 47.8 MB with librdkafka 2.15.0 (42.9 with 2.14.2): the extension (about 23.4 MB, everything linked
    # in, 2.15.0's share consumer among it) twice, in lib/sluice/ and in ext/sluice/ where RubyGems leaves
    # what make built; the sources
    expect(@installed_mb).to be < 51
  end

  it "installs, loads from GEM_HOME outside the checkout, and round-trips 1,000 messages" do
    expect(@outcome["gem_path"]).to start_with(@gem_home)
    expect(@outcome["loaded"]).to all(start_with(@gem_home))
    expect(@outcome["extension"]).to start_with(@gem_home)
    expect(@outcome["backend"]).to eq(Sluice::Native::Selector.backend.to_s) # same build settings as the tree's
    expect(@outcome["librdkafka"]).to eq(Sluice::LIBRDKAFKA.fetch(:version)) # the pinned release, linked in
    expect(@outcome["ldd"]).not_to include("librdkafka")
    expect(@outcome).to include("errors" => [], "produced" => 1_000, "read_back" => true)
  end
end
