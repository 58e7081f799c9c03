# frozen_string_literal: true

require "rbconfig"

module Sluice
  # Which compiled extension this Ruby loads. A checkout or a source install
  # builds lib/sluice/sluice_ext.so; the precompiled gem carries one per Ruby
  # minor (lib/sluice/3.1/, lib/sluice/3.3/, ...). Its required_ruby_version
  # can only be a range (">= 3.1, < 3.5.dev"), so a Ruby inside the range
  # without a build of its own (3.2) installs it: that Ruby is told what the
  # gem carries and what to install instead, rather than failing to require
  # a file it was never given.
  module NativeExtension
    # lib/sluice: where the extension of a build, or the precompiled gem's per-Ruby directories, are
    DIR = __dir__
    # The extension's file name (sluice_ext.so)
    NAME = "sluice_ext.#{RbConfig::CONFIG["DLEXT"]}".freeze

    # @raise [LoadError] in the precompiled gem, for a Ruby it has no extension for
    def self.load
      minor = RUBY_VERSION[/\A\d+\.\d+/]
      precompiled = File.join(DIR, minor, NAME)
      return require(precompiled) if File.exist?(precompiled)

      carried = precompiled_for
      return require(File.join(DIR, "sluice_ext")) if carried.empty? || File.exist?(File.join(DIR, NAME))

      raise LoadError, "sluice #{VERSION}: this precompiled gem carries its extension for Ruby #{carried.join(", ")} " \
                       "only, not for Ruby #{RUBY_VERSION}. Install the source gem, which builds it for this Ruby: " \
                       "gem install sluice --platform ruby"
    end

    # @return [Array<String>] the Ruby minors the precompiled gem carries an extension for ([] elsewhere)
    def self.precompiled_for
      Dir[File.join(DIR, "*", NAME)].map { |path| File.basename(File.dirname(path)) }
                                    .grep(/\A\d+\.\d+\z/).sort_by { |minor| Gem::Version.new(minor) }
    end
  end
end
