# frozen_string_literal: true

require "rbconfig"
require_relative "cross_rbconfig"
require_relative "debian_ruby"

module SluiceNativeGem
  # A Ruby minor version the precompiled gem carries an extension for, and
  # how extconf.rb is run for it. Every one is compiled on this machine, by
  # this machine's compiler against its C library: the gem's glibc floor is
  # this machine's, whichever Ruby the extension is for.
  module TargetRuby
    # This machine's own Ruby: extconf.rb as for any build.
    class Host
      def minor = RUBY_VERSION[/\A\d+\.\d+/]

      def label = "Ruby #{RUBY_VERSION} (this machine's)"

      def extconf_command(extconf, _dir) = [RbConfig.ruby, extconf]
    end

    # Another Ruby, whose headers and rbconfig.rb come from Debian's packages
    # (DebianRuby): this machine's Ruby runs extconf.rb with that RbConfig
    # (CrossRbconfig), and the Makefile's $(RUBY) stays this one (--ruby).
    class Cross
      # @param platform [Platform] a cross platform: mkmf is told it cross-compiles
      def initialize(debian_ruby, platform)
        @debian_ruby = debian_ruby
        @platform = platform
      end

      def minor = @debian_ruby.minor

      def label = @debian_ruby.label

      def extconf_command(extconf, dir)
        cross_compiling = @platform.name if @platform.cross?
        fake = CrossRbconfig.new(@debian_ruby.rbconfig, @debian_ruby.version, cross_compiling: cross_compiling)
                            .write(File.join(dir, "cross_rbconfig.rb"))
        [RbConfig.ruby, "-r", fake, extconf, "--ruby=#{RbConfig.ruby}"]
      end
    end

    RUBIES_ENV = "SLUICE_NATIVE_RUBIES" # "3.1,3.3": only these (default: this Ruby and every pinned one)

    # @param platform [Platform] for a cross platform, every Ruby is a Cross one (this Ruby runs only here)
    # @return [Array<Host, Cross>] in version order
    def self.all(platform)
      host = Host.new unless platform.cross?
      pinned = DebianRuby.minors(platform.debian_arch)
      minors = ENV.fetch(RUBIES_ENV, "").split(",").map(&:strip)
      minors = [host&.minor, *pinned].compact if minors.empty?
      minors.uniq.sort_by { |minor| Gem::Version.new(minor) }.map do |minor|
        next host if minor == host&.minor
        next Cross.new(DebianRuby.new(minor, arch: platform.debian_arch), platform) if pinned.include?(minor)

        raise "#{RUBIES_ENV}: no headers pinned for Ruby #{minor} on #{platform.name} (#{[host&.minor, *pinned].compact.join(", ")})"
      end
    end
  end
end
