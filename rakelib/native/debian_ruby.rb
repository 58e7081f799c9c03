# frozen_string_literal: true

require "fileutils"
require "open3"
require_relative "../../ext/sluice/recipe/archive"

module SluiceNativeGem
  # The headers and rbconfig.rb of a Ruby this machine does not run, taken
  # from Debian's packages of it (ruby3.x-dev: the headers; libruby3.x:
  # rbconfig.rb and config.h's arch directory), pinned like the libraries
  # librdkafka links: version and SHA-256 of each .deb, checked before
  # anything is unpacked. Unpacked once (dpkg-deb -x) into the cache, under a
  # directory named by the version and architecture, which is then read only.
  #
  # Debian's packages rather than a Ruby built here: they are what the
  # precompiled gem is tested against (Debian 13's Ruby 3.3, experimental's
  # 3.4), and the headers are the same upstream headers any build of that
  # Ruby installs; the libruby in them is never linked (SLUICE_NO_LIBRUBY).
  class DebianRuby
    POOL = "https://deb.debian.org/debian/pool/main"

    # Debian architecture => minor => the source package, its version, and each binary package's
    # SHA-256 (as the suite's Packages index for that architecture lists it): the headers' and
    # rbconfig.rb's, then the interpreter's (ruby3.x, which with libruby3.x installs that Ruby where
    # no suite has it: the install specs). A pool file stays as long as a suite ships its version:
    # when the suite moves on (experimental's 3.4 will), pin the new one. amd64 needs no 3.1: it is
    # this machine's Ruby; arm64's are the same Rubies, for the cross-compiled aarch64-linux gem.
    PINS = {
      "amd64" => {
        "3.3" => { suite: "trixie (13)", source: "ruby3.3", version: "3.3.8-2",
                   sha256: { "ruby3.3-dev" => "c266bd2ba0169a1831d8987ae5ff901d22b96b6b7a4f05a5db472e8584a70e73",
                             "libruby3.3" => "033d7f7359da6353d29e5cb87ef411357d3841c02fd7d1089897653fec665289" },
                   runtime: { "ruby3.3" => "10798ffe8edc86d7f9491655a115049a7a77dfbef5dc909dc13803cbb6c47f9b" } },
        "3.4" => { suite: "experimental", source: "ruby3.4", version: "3.4.11-1~exp1",
                   sha256: { "ruby3.4-dev" => "a4d40aa2f07f23b548e8d901a557e56bdf7f8c2fb2f95e58b9f22a6c2fe97e5d",
                             "libruby3.4" => "90ed169564ef3e3f017345d8452cc4c9a2acf7a0f006dcbceda66b8f3c55872b" },
                   runtime: { "ruby3.4" => "604cb406af73ac453a9a68c346749bf9fe05556734bee4399e548fe015a3ffa6" } }
      },
      "arm64" => {
        "3.1" => { suite: "bookworm (12)", source: "ruby3.1", version: "3.1.2-7+deb12u1",
                   sha256: { "ruby3.1-dev" => "ded1b9e32bd8814ded285c7c872e935183e4139dbf27b503a1176946a341f3e8",
                             "libruby3.1" => "1f5bf4b8c71389178627aae4d87e9cc3af3a926172d4c1c8470a2a0f861a2405" },
                   runtime: { "ruby3.1" => "e0a7c23c674cb6f952530d5b4ff8d100bf0a5357cc20b2487bbbcd66e2d1648c" } },
        "3.3" => { suite: "trixie (13)", source: "ruby3.3", version: "3.3.8-2",
                   sha256: { "ruby3.3-dev" => "a6b6e288035c52d4e1f5485790977a6c112937d8694fd417a9a642163f55bee3",
                             "libruby3.3" => "f6a27358f72f41df6156208742d7466e1f408c6dbb52730bde9638e1befa7862" },
                   runtime: { "ruby3.3" => "a9f2660cd68c3bd72dff9136148e42f0653bbc93fbef775fec52ea778aa3b009" } },
        "3.4" => { suite: "experimental", source: "ruby3.4", version: "3.4.11-1~exp1",
                   sha256: { "ruby3.4-dev" => "833f6df5e57dbafd57409f6065f844b06d03cce1fabcbfb6e69979630627a616",
                             "libruby3.4" => "912703a938caa77fb1b712a8a50570110be9fc67d37b86b44257e66007d67fe8" },
                   runtime: { "ruby3.4" => "555fa714b5240c6cd4ef7f0c044e2b89ff6b6a488540e02d89e4b0ceeeb9e828" } }
      }
    }.freeze
    DONE = ".sluice-unpacked" # written last: a directory without it is not one
    CACHE = File.join(ENV.fetch("XDG_CACHE_HOME", File.join(Dir.home, ".cache")), "sluice", "rubies", "debian")

    attr_reader :minor, :arch

    # @return [Array<String>] the minors pinned for a Debian architecture
    def self.minors(arch) = PINS.fetch(arch, {}).keys

    def initialize(minor, arch: "amd64", cache_root: CACHE, log: $stdout)
      @minor = minor
      @arch = arch
      @pin = PINS.fetch(arch).fetch(minor)
      @cache_root = cache_root
      @log = log
    end

    def label = "Ruby #{@minor} (#{@pin[:source]} #{@pin[:version]} #{@arch}, Debian #{@pin[:suite]})"

    # @return [String] upstream's version: "3.3.8" of Debian's "3.3.8-2"
    def version = @pin[:version][/\A[\d.]+/]

    # @return [String] the unpacked tree's rbconfig.rb (its paths are relative to where it lies)
    # @raise [SluiceBuild::Error]
    def rbconfig
      unpack unless File.exist?(File.join(tree, DONE))
      Dir[File.join(tree, "usr", "lib", "*", "ruby", "#{@minor}.0", "rbconfig.rb")].first or
        raise SluiceBuild::Error, "#{label}: no rbconfig.rb in #{tree}"
    end

    # @return [Array<String>] the .deb files that install this Ruby (libruby3.x, ruby3.x), verified
    def runtime_debs = debs(@pin[:sha256].reject { |package, _| package.end_with?("-dev") }.merge(@pin[:runtime]))

    private

    def tree = File.join(@cache_root, "#{@pin[:source]}_#{@pin[:version]}_#{@arch}")

    def unpack
      partial = "#{tree}.part.#{Process.pid}"
      FileUtils.rm_rf(partial)
      debs(@pin[:sha256]).each { |deb| run("dpkg-deb", "-x", deb, partial) }
      File.write(File.join(partial, DONE), @pin[:version])
      FileUtils.rm_rf(tree)
      File.rename(partial, tree)
      @log.puts("sluice: #{label} unpacked into #{tree}")
    ensure
      FileUtils.rm_rf(partial) if partial
    end

    # Each package's .deb, from the cache or downloaded, verified (SluiceBuild::Archive, as for librdkafka's sources).
    def debs(packages)
      packages.map do |package, sha256|
        file = "#{package}_#{@pin[:version]}_#{@arch}.deb"
        pin = SluiceBuild::Pin.new(name: package.tr(".-", "_"), title: package, version: @pin[:version],
                                   sha256: { file => sha256 }, urls: ["#{POOL}/r/#{@pin[:source]}/#{file}"])
        downloads = File.join(@cache_root, "debs")
        SluiceBuild::Archive.new(pin, dirs: [downloads], download_dir: downloads, log: @log).path
      end
    end

    def run(*command)
      output, status = Open3.capture2e(*command)
      raise SluiceBuild::Error, "#{command.join(" ")} failed: #{output}" unless status.success?
    end
  end
end
