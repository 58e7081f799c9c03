# frozen_string_literal: true

require "rubygems/package"
require_relative "../../../rakelib/native/debian_ruby"

# The precompiled platform gem (`rake native`, here only the x86_64-linux
# one: SLUICE_NATIVE_PLATFORM): one gem with an extension per Ruby minor
# (3.1: this machine's Ruby; 3.3 and 3.4: compiled here against Debian's
# headers of them), installed where nothing could build it: bare Debian roots
# made with debootstrap (Packaging::BareRoot, kept in ~/.cache/sluice/roots),
# with Ruby and no compiler, make, pkg-config, librdkafka or OpenSSL headers.
# Debian 12 has Ruby 3.1; Debian 13 has 3.3, and experimental's 3.4 (libruby3.4
# and ruby3.4, pinned beside its headers) is installed into the same root.
# Besides Debian's Rubies (libruby-3.x.so.3.x), a Ruby 3.3 built from source
# with --enable-shared as Docker's images and RVM build it (libruby.so.3.3;
# Packaging::SourceRuby, built once per machine), run with no compiler on
# PATH. Each Ruby installs the gem with `gem install --local` and round-trips
# messages with the project's broker (the roots share the host's network).
# GSSAPI (MIT Kerberos and Cyrus SASL linked in) against a realm of the
# spec's own (spec/support/kerberos.rb: MIT's KDC, a broker offering GSSAPI):
# in the Debian 13 root, which has no Kerberos or SASL library and no kinit,
# from a ticket got outside it; in the Ruby built from source, librdkafka
# running this machine's kinit from a keytab, as users configure it.
# Needs root (chroot, mount), debootstrap, Debian's registry and MIT's KDC
# (bin/setup installs krb5-kdc); runs when asked: .ci/run sets SLUICE_GEM_SPEC=1.
RSpec.describe "The precompiled gem", :kafka, timeout: 900,
                                              skip: ENV["SLUICE_GEM_SPEC"] != "1" && "SLUICE_GEM_SPEC=1 builds and installs it (.ci/run)" do
  minors = %w[3.1 3.3 3.4]
  package = File.join(Packaging::ROOT, "pkg", "sluice-#{Sluice::VERSION}-#{Gem::Platform.local}.gem")
  native = File.join(Packaging::ROOT, "tmp", "native", Gem::Platform.local.to_s)

  # Installs the gem with one Ruby of the root and round-trips 1,000 messages.
  # @return [Hash] what the round trip printed (Packaging.round_trip_script)
  define_method(:install_and_round_trip) do |root, ruby:, gem:|
    root.uninstall(gem, "sluice")
    Packaging::INSTALL_TIMES["precompiled gem (#{ruby}, #{root.path[%r{[^/]+\z}]})"] = Packaging.timed do
      root.run(gem, "install", "--local", "--no-document", root.copy_in(package))
    end
    script = Packaging.round_trip_script(TestKafka::BROKERS, "sluice-spec-gem", 1_000)
    JSON.parse(root.run(ruby, "-e", script).lines.last)
  end

  define_method(:expect_round_trip) do |outcome, minor, gem_home: "/var/lib/gems/#{minor}.0"|
    expect(outcome["gem_path"]).to eq("#{gem_home}/gems/#{@spec.full_name}")
    expect(outcome["extension"]).to eq(File.join(outcome["gem_path"], "lib", "sluice", minor, "sluice_ext.so"))
    expect(outcome["librdkafka"]).to eq(Sluice::LIBRDKAFKA.fetch(:version))
    expect(outcome["ldd"]).not_to match(/librdkafka|libssl|libcrypto|libsasl|libzstd/)
    expect(outcome).to include("errors" => [], "produced" => 1_000, "read_back" => true)
  end

  before(:context) do
    skip "chroot needs root" unless Process.uid.zero?
    skip "debootstrap is not installed (bin/setup installs it)" unless system("command -v debootstrap >/dev/null")

    missing = Kerberos.missing_tools
    raise "GSSAPI's examples need MIT Kerberos's #{missing.join(", ")} (bin/setup installs krb5-kdc, krb5-admin-server, krb5-user)" if missing.any?

    # Only the gem installed here: plain `rake native` cross-compiles the aarch64 one too (bin/test-aarch64's).
    Packaging.run({ "SLUICE_NATIVE_PLATFORM" => Gem::Platform.local.to_s }, "rake", "native", chdir: Packaging::ROOT)
    @spec = Gem::Package.new(package).spec
    Kerberos.start
  end

  after(:context) { Kerberos.stop }

  # 100 messages through the Kerberos broker's GSSAPI listener.
  define_method(:gssapi_script) do |**kafka|
    Packaging.round_trip_script(Kerberos::BROKERS, Kerberos::TOPIC, 100, kafka: Kerberos.client_config.merge(kafka))
  end

  define_method(:expect_gssapi_round_trip) do |outcome, tickets_before|
    expect(outcome).to include("errors" => [], "produced" => 100, "read_back" => true)
    expect(Kerberos.service_tickets).to be > tickets_before # for kafka/127.0.0.1: GSSAPI it was
  end

  it "holds an extension for each Ruby minor, no C sources, depends on nothing, and says which Rubies it is for" do
    expect(@spec.platform.to_s).to eq(Gem::Platform.local.to_s)
    expect(@spec.files).to include("lib/sluice.rb", "exe/sluice", "README.md", *minors.map { |minor| "lib/sluice/#{minor}/sluice_ext.so" })
    expect(@spec.files.grep(/sluice_ext/).size).to eq(minors.size)
    expect(@spec.executables).to eq(["sluice"])
    expect(@spec.files.grep(%r{\Aext/})).to eq([])
    expect(@spec.extensions).to eq([])
    expect(@spec.dependencies).to eq([])
    expect(@spec.description).to include("Ruby 3.1, 3.3, 3.4", "gem install sluice --platform ruby")
    %w[3.1.0 3.3.9 3.4.11].each { |version| expect(@spec.required_ruby_version).to be_satisfied_by(Gem::Version.new(version)) }
    %w[3.0.7 3.5.0.preview1 3.5.0].each { |version| expect(@spec.required_ruby_version).not_to be_satisfied_by(Gem::Version.new(version)) }
  end

  # A NEEDED libruby-3.1.so.3.1 (Debian's name) made the gem unloadable in
  # Rubies built from source (libruby.so.3.1, or no shared libruby at all).
  it "names no libruby and no library beyond the C library's (its resolver too, for Kerberos), in any of its extensions" do
    minors.each do |minor|
      needed = Packaging.run({}, "readelf", "-d", File.join(native, minor, "sluice_ext.so"))
                        .scan(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/).flatten
      expect(needed).not_to be_empty
      expect(needed).to all(match(/\A(libc|libm|libpthread|libdl|librt|libresolv|ld-linux[-\w]*)\.so/)), "Ruby #{minor}: #{needed.join(", ")}"
    end
  end

  context "in a bare Debian 12 root (Ruby 3.1)" do
    before(:context) do
      @root = Packaging::BareRoot.new("bookworm", packages: ["ruby"]).prepare
      @tools = @root.tools
      @outcome = install_and_round_trip(@root, ruby: "ruby", gem: "gem")
    end

    after(:context) do
      @root&.uninstall("gem", "sluice")
      @root&.release
    end

    it "installs where there is no compiler, make, pkg-config or librdkafka, and round-trips 1,000 messages" do
      expect(@tools).to eq([])
      expect_round_trip(@outcome, "3.1")
    end

    # A Ruby inside required_ruby_version without an extension of its own
    # (3.2): here, the 3.1 one taken away from the installed gem.
    it "refuses a Ruby it carries no extension for with a LoadError naming the Rubies it does, and the source gem" do
      FileUtils.rm_rf(File.join(@root.path, @outcome["gem_path"], "lib", "sluice", "3.1"))
      message = @root.run("ruby", "-e", 'begin; require "sluice"; rescue LoadError => e; puts e.message; end')
      expect(message).to include("carries its extension for Ruby 3.3, 3.4 only", "gem install sluice --platform ruby")
    end
  end

  context "in a bare Debian 13 root (Ruby 3.3, and experimental's 3.4)" do
    before(:context) do
      debs = SluiceNativeGem::DebianRuby.new("3.4").runtime_debs
      @root = Packaging::BareRoot.new("trixie", packages: ["ruby"], debs: debs).prepare
      @tools = @root.tools
      @outcomes = { "3.3" => install_and_round_trip(@root, ruby: "ruby3.3", gem: "gem3.3"),
                    "3.4" => install_and_round_trip(@root, ruby: "ruby3.4", gem: "gem3.4") }
      @kerberos_files = @root.run("sh", "-c", "find / -xdev \\( -name 'libkrb5*' -o -name 'libgssapi*' -o -name 'libsasl2*' " \
                                              "-o -name kinit \\) -print; true").split
      # No kinit here: a ticket got outside (a cache of its own per Ruby, so that each asks the KDC
      # for the broker's ticket), and librdkafka told not to run kinit (relogin 0).
      krb5_conf = @root.copy_in(Kerberos::KRB5_CONF)
      @gssapi = %w[3.3 3.4].to_h do |minor|
        ccache = File.join(Kerberos::DIR, "ccache-root-#{minor}")
        Kerberos.kinit(ccache)
        tickets = Kerberos.service_tickets
        env = ["KRB5_CONFIG=#{krb5_conf}", "KRB5CCNAME=FILE:#{@root.copy_in(ccache)}"]
        outcome = JSON.parse(@root.run(*env, "ruby#{minor}", "-e", gssapi_script("sasl.kerberos.min.time.before.relogin": 0)).lines.last)
        [minor, [outcome, tickets]]
      end
    end

    after(:context) do
      %w[gem3.3 gem3.4].each { |gem| @root&.uninstall(gem, "sluice") }
      @root&.release
    end

    it "installs in Ruby 3.3 and 3.4 where there is no compiler, and each round-trips 1,000 messages with its own extension" do
      expect(@tools).to eq([])
      @outcomes.each { |minor, outcome| expect_round_trip(outcome, minor) }
    end

    it "authenticates with GSSAPI in Ruby 3.3 and 3.4 where there is no Kerberos or SASL library and no kinit" do
      expect(@kerberos_files).to eq([])
      @gssapi.each_value { |outcome, tickets_before| expect_gssapi_round_trip(outcome, tickets_before) }
    end
  end

  # Where the gem's first precompiled build failed ("incompatible library
  # version": it brought Debian's libruby in beside the running one).
  context "in Ruby 3.3 built from source with --enable-shared (libruby.so.3.3), with no compiler on PATH" do
    before(:context) do
      @ruby = Packaging::SourceRuby.new.prepare
      @dir = Dir.mktmpdir("sluice-source-ruby-")
      @gem_home = File.join(@dir, "gem_home")
      # The Ruby's bin (ruby, gem, and no compiler: checked below) and ldd for the round trip: not
      # /usr/bin, which holds gcc, cc and make.
      tools = File.join(@dir, "tools")
      FileUtils.mkdir_p(tools)
      File.symlink("/usr/bin/ldd", File.join(tools, "ldd"))
      @env = ["PATH=#{File.join(@ruby.prefix, "bin")}:#{tools}", "HOME=#{@dir}", "GEM_HOME=#{@gem_home}", "GEM_PATH=#{@gem_home}",
              "LANG=C.UTF-8"]
      @tools = in_clean_env("/bin/sh", "-c", "for tool in cc gcc make pkg-config; do command -v $tool; done; true").split
      Packaging::INSTALL_TIMES["precompiled gem (Ruby #{Packaging::SourceRuby::VERSION} from source, --enable-shared)"] = Packaging.timed do
        in_clean_env(@ruby.gem, "install", "--local", "--no-document", package)
      end
      script = Packaging.round_trip_script(TestKafka::BROKERS, "sluice-spec-gem", 1_000)
      @outcome = JSON.parse(in_clean_env(@ruby.ruby, "-e", script).lines.last)
      # GSSAPI as users configure it: librdkafka runs kinit (this machine's) from the client's keytab.
      File.symlink(Packaging.run({}, "sh", "-c", "command -v kinit").strip, File.join(tools, "kinit"))
      @env += Kerberos.env(ccache: File.join(@dir, "ccache")).map { |name, value| "#{name}=#{value}" }
      @tickets_before = Kerberos.service_tickets
      @gssapi = JSON.parse(in_clean_env(@ruby.ruby, "-e", gssapi_script).lines.last)
      # A cache of its own: with the one above, still holding sluice-client's ticket, it would authenticate.
      kafka = Kerberos.client_config(principal: "nobody").merge("message.timeout.ms": 30_000)
      @refused = JSON.parse(in_clean_env("KRB5CCNAME=FILE:#{File.join(@dir, "ccache-nobody")}", @ruby.ruby, "-e", <<~RUBY).lines.last)
        require "json"
        require "sluice"
        producer = Sluice::Producer.new { |config| config.kafka = #{kafka.inspect} }
        started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        begin
          producer.produce_sync(topic: #{Kerberos::TOPIC.inspect}, partition: 0, payload: "refused")
          outcome = { "error" => nil }
        rescue Sluice::Errors::BaseError => e
          outcome = { "error" => e.class.name, "message" => e.message }
        end
        producer.close
        puts JSON.generate(outcome.merge("seconds" => Process.clock_gettime(Process::CLOCK_MONOTONIC) - started))
      RUBY
    end

    after(:context) { FileUtils.rm_rf(@dir) if @dir }

    # Nothing of the host's environment (GEM_PATH, RUBYOPT, PATH) and nothing of the checkout.
    define_method(:in_clean_env) { |*command| Packaging.run({}, "env", "-i", *@env, *command, chdir: @dir) }

    it "is a Ruby whose ruby NEEDs upstream's libruby.so.3.3, not Debian's libruby-3.3.so.3.3" do
      expect(@ruby.needed).to include("libruby.so.3.3")
      expect(@ruby.needed.grep(/libruby-/)).to eq([])
    end

    it "installs the gem where no compiler is on PATH, loads its 3.3 extension into that libruby, and round-trips 1,000 messages" do
      expect(@tools).to eq([])
      expect_round_trip(@outcome, "3.3", gem_home: @gem_home)
      expect(@outcome["libruby"]).to eq([File.realpath(File.join(@ruby.prefix, "lib", "libruby.so.3.3"))])
    end

    it "authenticates with GSSAPI from a keytab, librdkafka running kinit, and round-trips 100 messages" do
      expect(File).to exist(File.join(@dir, "ccache")) # kinit's, for the client's principal
      expect_gssapi_round_trip(@gssapi, @tickets_before)
    end

    # kinit fails (no key for the principal), so GSSAPI finds no credentials:
    # the call fails with GSSAPI's reason, not with message.timeout.ms's.
    it "names a principal its keytab has no key for: an AuthenticationError with GSSAPI's reason, long before the message times out" do
      expect(@refused).to include("error" => "Sluice::Errors::AuthenticationError")
      expect(@refused["message"]).to include("GSSAPI Error", "No Kerberos credentials available")
      # No wall-clock bound: produce_sync gives up after max_wait_timeout (5 s) with a WaitTimeoutError, not this.
    end
  end
end
