# frozen_string_literal: true

require "etc"
require "fileutils"
require "open3"
require "rbconfig"
require "rubygems/package"
require "rubygems/package_task"

# The gems (rake-compiler's convention: `rake gem`, `rake native gem`):
#   rake gem     pkg/sluice-VERSION.gem, the source gem: librdkafka built at install time
#   rake native  pkg/sluice-VERSION-PLATFORM.gem, precompiled for this platform and this Ruby:
#                installs with no compiler, no pkg-config and no librdkafka
module SluiceNativeGem
  ROOT = File.expand_path("..", __dir__)
  SOURCE_SPEC = Gem::Specification.load(File.join(ROOT, "sluice.gemspec"))
  # The libraries a precompiled extension may still load: the C library's.
  # Anything else (libssl, libsasl2, libzstd...) would have to be installed by
  # the user, which is what the precompiled gem is for not needing; and a
  # libruby by name would refuse every Ruby whose libruby is named otherwise
  # or that has none (ruby-build, RVM and Docker images build them so).
  ALLOWED_NEEDED = /\A(libc|libm|libpthread|libdl|librt|ld-linux[-\w]*)\.so/
  # Cyrus SASL (GSSAPI) links dynamically: left out; the source gem builds it
  # in where it is installed. No libruby: the running Ruby has its symbols.
  BUILD_ENV = { "SLUICE_LIBRDKAFKA_GSSAPI" => "0", "SLUICE_NO_LIBRUBY" => "1" }.freeze

  module_function

  def ruby_minor = RUBY_VERSION[/\A\d+\.\d+/]

  # @return [String] the path of the platform gem
  def build
    extension = compile
    needed = needed_libraries(extension)
    leaked = needed.grep_v(ALLOWED_NEEDED)
    raise "#{extension} would load #{leaked.join(", ")}: a precompiled gem must not (needs: #{needed.join(", ")})" if leaked.any?

    puts "sluice: the extension loads only #{needed.join(", ")}"
    package(extension)
  end

  # extconf.rb and make in a directory of their own: the checkout's
  # lib/sluice/sluice_ext.so (the development build) is left alone.
  def compile
    dir = File.join(ROOT, "tmp", "native", Gem::Platform.local.to_s, ruby_minor)
    FileUtils.rm_rf(dir)
    FileUtils.mkdir_p(dir)
    Dir.chdir(dir) do
      run(BUILD_ENV, RbConfig.ruby, File.join(ROOT, "ext", "sluice", "extconf.rb"))
      run({}, "make", "-j#{Etc.nprocessors}")
      # Debug sections are most of its size (19 MB -> 9 MB); symbols stay for backtraces.
      run({}, "strip", "--strip-debug", "sluice_ext.#{RbConfig::CONFIG["DLEXT"]}")
    end
    File.join(dir, "sluice_ext.#{RbConfig::CONFIG["DLEXT"]}")
  end

  def run(env, *command)
    system(env, *command, exception: true)
  end

  # The DT_NEEDED entries: what the dynamic loader loads for the extension
  # itself (ldd would add what libruby needs too).
  def needed_libraries(extension)
    output, status = Open3.capture2("readelf", "-d", extension)
    raise "readelf -d #{extension} failed" unless status.success?

    output.scan(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/).flatten
  end

  # The platform gem: the Ruby code, the sluice command, README, LICENSE, CHANGELOG and the
  # extension under lib/sluice/<ruby minor>/ (where lib/sluice.rb looks first,
  # so one gem can carry a build per Ruby version); no C sources, no
  # extconf.rb, no mini_portile2 dependency.
  def package(extension)
    binary = "lib/sluice/#{ruby_minor}/#{File.basename(extension)}"
    spec = platform_spec(binary)
    stage = File.join(ROOT, "tmp", "native", "stage")
    FileUtils.rm_rf(stage)
    spec.files.each do |file|
      FileUtils.mkdir_p(File.join(stage, File.dirname(file)))
      # preserve: exe/sluice keeps its executable bit in the package
      FileUtils.cp(file == binary ? extension : File.join(ROOT, file), File.join(stage, file), preserve: true)
    end
    FileUtils.mkdir_p(File.join(ROOT, "pkg"))
    path = File.join(ROOT, "pkg", spec.file_name)
    Dir.chdir(stage) { FileUtils.mv(Gem::Package.build(spec), path) }
    puts "sluice: #{path}"
    path
  end

  def platform_spec(binary)
    SOURCE_SPEC.dup.tap do |spec|
      spec.platform = Gem::Platform.local
      spec.required_ruby_version = [">= #{ruby_minor}", "< #{ruby_minor.succ}.dev"]
      spec.extensions = []
      spec.dependencies.delete_if { |dependency| dependency.name == "mini_portile2" }
      spec.requirements = []
      spec.files = spec.files.grep_v(%r{\Aext/}) + [binary]
    end
  end
end

Gem::PackageTask.new(SluiceNativeGem::SOURCE_SPEC) { |package| package.need_tar = false }

desc "Build pkg/sluice-VERSION-PLATFORM.gem: precompiled for this platform and Ruby, librdkafka and its dependencies linked in"
task :native do
  SluiceNativeGem.build
end
