# frozen_string_literal: true

module SluiceNativeGem
  # A file for `ruby -r FILE extconf.rb`: this machine's Ruby runs
  # extconf.rb, but mkmf sees another Ruby's RbConfig (headers, config.h,
  # CFLAGS, ruby_version), so the Makefile compiles the extension for that
  # Ruby (rake-compiler's "fake.rb" for cross-rubies does the same).
  #
  # The target's rbconfig.rb is loaded where it lies in the unpacked
  # package: its paths are relative to its own location (TOPDIR), so they
  # point into the unpacked tree, not at /usr. It refuses to load in another
  # Ruby version (its first line compares RUBY_VERSION): RUBY_VERSION is the
  # target's while it loads, then this Ruby's again, since everything else
  # in the process (RubyGems, mini_portile2, mkmf) is this Ruby's code.
  #
  # What is set on top of it, and why:
  # - LIBRUBYARG empty: mkmf links its test programs (have_func, the
  #   compiler check) against it, and the target's libruby needs a newer
  #   glibc than this machine's (Debian 13's: 2.38), so no test program
  #   would link; the extension itself names no libruby (SLUICE_NO_LIBRUBY),
  #   and the checks then test what the extension can use: this libc.
  # - CROSS_COMPILING, for another architecture only (the aarch64-linux gem):
  #   mkmf then never runs a test program (try_constant compiles a binary
  #   search instead), since one built for that machine cannot run here.
  class CrossRbconfig
    # @param cross_compiling [String, nil] the target's platform when it is another architecture
    def initialize(rbconfig, version, cross_compiling: nil)
      @rbconfig = rbconfig
      @version = version
      @cross_compiling = cross_compiling
    end

    # @return [String] the file written
    def write(path)
      File.write(path, source)
      path
    end

    private

    def source
      <<~RUBY + cross_compiling
        # frozen_string_literal: true
        # Written by rake native (rakelib/native/cross_rbconfig.rb): mkmf sees Ruby #{@version}'s RbConfig.
        begin
          require "mini_portile2" # found and loaded with this Ruby's RbConfig (a gem of this Ruby's)
        rescue LoadError
          nil # extconf.rb's recipe says what to install
        end
        host_version = RUBY_VERSION
        Object.send(:remove_const, :RbConfig)
        Object.send(:remove_const, :RUBY_VERSION)
        Object.const_set(:RUBY_VERSION, #{@version.inspect})
        load #{@rbconfig.inspect}
        Object.send(:remove_const, :RUBY_VERSION)
        Object.const_set(:RUBY_VERSION, host_version)
        %w[LIBRUBYARG LIBRUBYARG_SHARED LIBRUBYARG_STATIC].each { |name| RbConfig::CONFIG[name] = RbConfig::MAKEFILE_CONFIG[name] = "" }
      RUBY
    end

    # After rbconfig.rb, which keeps a CROSS_COMPILING already defined (this
    # Ruby's, nil), and before mkmf, which reads it.
    def cross_compiling
      return "" unless @cross_compiling

      <<~RUBY
        Object.send(:remove_const, :CROSS_COMPILING) if defined?(CROSS_COMPILING)
        Object.const_set(:CROSS_COMPILING, #{@cross_compiling.inspect})
      RUBY
    end
  end
end
