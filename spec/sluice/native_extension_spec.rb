# frozen_string_literal: true

require "tmpdir"

# Which extension lib/sluice.rb loads, in a gem laid out as the precompiled
# one is (lib/sluice/<minor>/sluice_ext.so) but carrying no build for this
# Ruby: a Ruby inside its required_ruby_version range it was not built for
# (3.2 in ">= 3.1, < 3.5.dev"). In a process of its own, on a copy of
# lib/sluice/native_extension.rb beside stand-in extensions.
RSpec.describe Sluice::NativeExtension do
  define_method(:load_in_gem) do |minors|
    Dir.mktmpdir("sluice-layout-") do |dir|
      lib = File.join(dir, "lib", "sluice")
      FileUtils.mkdir_p(lib)
      FileUtils.cp(%w[native_extension.rb version.rb].map { |file| File.join(Packaging::ROOT, "lib", "sluice", file) }, lib)
      minors.each { |minor| FileUtils.mkdir_p(File.join(lib, minor)) && FileUtils.touch(File.join(lib, minor, described_class::NAME)) }
      script = 'require "./lib/sluice/version"; require "./lib/sluice/native_extension"
                begin; Sluice::NativeExtension.load; rescue LoadError => e; puts "#{e.class}: #{e.message}"; end'
      Packaging.run({}, RbConfig.ruby, "-e", script, chdir: dir)
    end
  end

  it "refuses a Ruby the precompiled gem has no extension for, naming the Rubies it has one for and the source gem" do
    others = %w[3.3 3.4 9.8].reject { |minor| RUBY_VERSION.start_with?("#{minor}.") }.first(2)
    expect(load_in_gem(others)).to eq(
      "LoadError: sluice #{Sluice::VERSION}: this precompiled gem carries its extension for Ruby #{others.join(", ")} only, " \
      "not for Ruby #{RUBY_VERSION}. Install the source gem, which builds it for this Ruby: gem install sluice --platform ruby\n"
    )
  end

  it "knows which Rubies the gem carries an extension for, and none in a checkout" do
    expect(described_class.precompiled_for).to eq([])
  end
end
