# frozen_string_literal: true

require "rubygems/package"

# The precompiled platform gem (`rake native`) installed where nothing could
# build it: a bare Debian 12 root made with debootstrap, with only Debian's
# ruby installed in it (no compiler, make, pkg-config, librdkafka or OpenSSL
# headers). It installs with `gem install --local` and round-trips messages
# with the project's broker (the root shares the host's network). Needs root
# (chroot), debootstrap (bin/setup installs it) and Debian's registry; about
# a minute and a half, so it runs when asked: .ci/run sets SLUICE_GEM_SPEC=1.
RSpec.describe "The precompiled gem", :kafka, timeout: 600,
                                              skip: ENV["SLUICE_GEM_SPEC"] != "1" && "SLUICE_GEM_SPEC=1 builds and installs it (.ci/run)" do
  mirror = ENV.fetch("SLUICE_DEBIAN_MIRROR", "http://deb.debian.org/debian")
  bare = File.join(Packaging::ROOT, "tmp", "bare-debian")

  define_method(:in_root) { |*command| Packaging.run({ "PATH" => "/usr/sbin:/usr/bin:/sbin:/bin" }, "chroot", bare, *command) }

  before(:context) do
    skip "chroot needs root" unless Process.uid.zero?
    skip "debootstrap is not installed (bin/setup installs it)" unless system("command -v debootstrap >/dev/null")

    Packaging.run({}, "rake", "native", chdir: Packaging::ROOT)
    @package = File.join(Packaging::ROOT, "pkg", "sluice-#{Sluice::VERSION}-#{Gem::Platform.local}.gem")
    @spec = Gem::Package.new(@package).spec

    FileUtils.rm_rf(bare)
    Packaging.run({}, "debootstrap", "--variant=minbase", "bookworm", bare, mirror)
    FileUtils.cp("/etc/resolv.conf", File.join(bare, "etc", "resolv.conf"))
    in_root("sh", "-c", "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -q -y --no-install-recommends ruby")
    @tools = in_root("sh", "-c", "for tool in cc gcc make pkg-config; do command -v $tool; done; " \
                                 "find / -xdev -name 'librdkafka*' -o -xdev -name 'rdkafka.h'; true").split
    FileUtils.cp(@package, File.join(bare, "tmp"))
    Packaging::INSTALL_TIMES["precompiled gem"] = Packaging.timed do
      in_root("gem", "install", "--local", "--no-document", "/tmp/#{File.basename(@package)}")
    end
    script = Packaging.round_trip_script(TestKafka::BROKERS, "sluice-spec-gem", 1_000)
    @outcome = JSON.parse(in_root("ruby", "-e", script).lines.last)
  end

  after(:context) { FileUtils.rm_rf(bare) }

  it "holds the extension for this Ruby and platform, no C sources, and depends on nothing" do
    ruby = RUBY_VERSION[/\A\d+\.\d+/]
    expect(@spec.platform.to_s).to eq(Gem::Platform.local.to_s)
    expect(@spec.files).to include("lib/sluice.rb", "lib/sluice/#{ruby}/sluice_ext.so", "exe/sluice", "README.md")
    expect(@spec.executables).to eq(["sluice"])
    expect(@spec.files.grep(%r{\Aext/})).to eq([])
    expect(@spec.extensions).to eq([])
    expect(@spec.dependencies).to eq([])
    expect(@spec.required_ruby_version).to be_satisfied_by(Gem::Version.new(RUBY_VERSION))
    expect(@spec.required_ruby_version).not_to be_satisfied_by(Gem::Version.new("#{ruby.succ}.0"))
  end

  # A NEEDED libruby-3.1.so.3.1 (Debian's name) made the gem unloadable in
  # Rubies built from source (libruby.so.3.1, or no shared libruby at all).
  it "names no libruby and no library beyond the C library's: the running Ruby provides Ruby's symbols (the round trip below loads it)" do
    extension = File.join(Packaging::ROOT, "tmp", "native", Gem::Platform.local.to_s, RUBY_VERSION[/\A\d+\.\d+/], "sluice_ext.so")
    needed = Packaging.run({}, "readelf", "-d", extension).scan(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/).flatten
    expect(needed).not_to be_empty
    expect(needed).to all(match(/\A(libc|libm|libpthread|libdl|librt|ld-linux[-\w]*)\.so/))
  end

  it "installs where there is no compiler, make, pkg-config or librdkafka, and round-trips 1,000 messages" do
    expect(@tools).to eq([])
    expect(@outcome["gem_path"]).to eq("/var/lib/gems/#{RbConfig::CONFIG["ruby_version"]}/gems/#{@spec.full_name}")
    expect(@outcome["extension"]).to start_with(@outcome["gem_path"])
    expect(@outcome["librdkafka"]).to eq(Sluice::LIBRDKAFKA.fetch(:version))
    expect(@outcome["ldd"]).not_to match(/librdkafka|libssl|libcrypto|libsasl|libzstd/)
    expect(@outcome).to include("errors" => [], "produced" => 1_000, "read_back" => true)
  end
end
