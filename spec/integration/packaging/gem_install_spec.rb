# frozen_string_literal: true

require "json"
require "open3"
require "rubygems/package"
require "tmpdir"

# The gem as users get it: built from sluice.gemspec, installed (its extension
# compiled by RubyGems, the pinned librdkafka built from its archive and linked
# in) into a temporary GEM_HOME, then required from a directory outside the
# checkout. Takes about a minute of compiling, so it runs when asked: .ci/run
# sets SLUICE_GEM_SPEC=1. The installed gems it may use (mini_portile2, a
# build dependency) are the system's; the librdkafka archive is the one
# bin/setup fetched (these machines have no GitHub access).
RSpec.describe "The built gem", :kafka, timeout: 300,
                                        skip: ENV["SLUICE_GEM_SPEC"] != "1" && "SLUICE_GEM_SPEC=1 builds and installs it (.ci/run)" do
  root = File.expand_path("../../..", __dir__)

  # Run outside the checkout with only the temporary GEM_HOME: nothing of the
  # tree (RUBYLIB, -I, the working directory) can stand in for the gem.
  def run_isolated(env, *command, chdir:)
    clean = { "RUBYLIB" => nil, "RUBYOPT" => nil, "BUNDLE_GEMFILE" => nil }
    output, status = Open3.capture2e(clean.merge(env), *command, chdir: chdir)
    raise "#{command.join(" ")} failed (#{status}):\n#{output}" unless status.success?

    output
  end

  before(:context) do
    @dir = Dir.mktmpdir("sluice-gem-")
    gem_home = File.join(@dir, "gem_home")
    env = { "GEM_HOME" => gem_home, "GEM_PATH" => [gem_home, *Gem.path].join(File::PATH_SEPARATOR) }
    archive = Dir[File.join(root, "tmp/librdkafka/archives/librdkafka_#{Sluice::LIBRDKAFKA.fetch(:version)}.orig.tar.gz")].first
    env["SLUICE_LIBRDKAFKA_ARCHIVE"] = archive if archive
    package = File.join(@dir, "sluice.gem")
    run_isolated(env, "gem", "build", "sluice.gemspec", "--output", package, chdir: root)
    @files = Gem::Package.new(package).contents
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    run_isolated(env, "gem", "install", "--local", "--no-document", package, chdir: @dir)
    took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    puts format("\n    gem install of the source gem (librdkafka built from source): %.1f s", took)
    script = <<~RUBY
      require "json"
      require "sluice"
      producer = Sluice::Producer.new { |config| config.kafka = { "bootstrap.servers": #{TestKafka::BROKERS.inspect} } }
      report = producer.produce_sync(topic: "sluice-spec-1p", payload: "from the installed gem")
      producer.close
      puts JSON.generate("gem_path" => Gem.loaded_specs.fetch("sluice").full_gem_path,
                         "loaded" => $LOADED_FEATURES.grep(/sluice/), "backend" => Sluice::Native::Selector.backend,
                         "ldd" => `ldd \#{$LOADED_FEATURES.grep(/sluice_ext/).first}`,
                         "librdkafka" => Sluice.librdkafka_version, "offset" => report.offset, "error" => report.error&.code)
    RUBY
    @outcome = JSON.parse(run_isolated(env, RbConfig.ruby, "-e", script, chdir: @dir).lines.last)
    @gem_home = gem_home
  end

  after(:context) { FileUtils.rm_rf(@dir) if @dir }

  it "holds lib/, ext/, README, LICENSE and CHANGELOG, and no specs, build outputs or temporary files" do
    expect(@files).to include("lib/sluice.rb", "ext/sluice/extconf.rb", "ext/sluice/selector.c", "README.md", "LICENSE",
                              "CHANGELOG.md")
    expect(@files).to all(match(%r{\A(lib/|ext/sluice/)|\A(README\.md|LICENSE|CHANGELOG\.md)\z}))
    expect(@files.grep(/\.(so|bundle|o)\z|Makefile|mkmf\.log|\Aspec|\Atmp/)).to eq([])
  end

  it "installs, loads from GEM_HOME outside the checkout, and delivers with produce_sync" do
    expect(@outcome["gem_path"]).to start_with(@gem_home)
    expect(@outcome["loaded"]).to all(start_with(@gem_home))
    expect(@outcome["loaded"].grep(/sluice_ext/)).not_to be_empty
    expect(@outcome["backend"]).to eq(Sluice::Native::Selector.backend.to_s) # same build settings as the tree's
    expect(@outcome["librdkafka"]).to eq(Sluice::LIBRDKAFKA.fetch(:version)) # the pinned release, linked in
    expect(@outcome["ldd"]).not_to include("librdkafka")
    expect(@outcome).to include("error" => nil, "offset" => be >= 0)
  end
end
