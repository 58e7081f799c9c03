# frozen_string_literal: true

require "etc"
require "fileutils"
require "open3"
require "rbconfig"
require "rubygems/package"
require "rubygems/package_task"

require_relative "native/platform"
require_relative "native/target_ruby"

# The gems (rake-compiler's convention: `rake gem`, `rake native gem`):
#   rake gem     pkg/sluice-VERSION.gem, the source gem: librdkafka built at install time
#   rake native  pkg/sluice-VERSION-x86_64-linux.gem and pkg/sluice-VERSION-aarch64-linux.gem, the
#                precompiled gems: for this machine's platform and for aarch64, cross-compiled here
#                (crossbuild-essential-arm64, checked for before anything is built); each with one
#                extension per Ruby minor (this Ruby's and each one pinned in
#                rakelib/native/debian_ruby.rb, all compiled here); installs with no compiler, no
#                pkg-config and no librdkafka
#   SLUICE_NATIVE_PLATFORM=x86_64-linux rake native   only that one (or aarch64-linux): the
#                precompiled gem's spec builds only the gem it installs, bin/test-aarch64 the other
module SluiceNativeGem
  ROOT = File.expand_path("..", __dir__)
  SOURCE_SPEC = Gem::Specification.load(File.join(ROOT, "sluice.gemspec"))
  # The libraries a precompiled extension may still load: the C library's
  # (libresolv, glibc's resolver, for Kerberos to find a realm's KDCs).
  # Anything else (libssl, libsasl2, libzstd...) would have to be installed by
  # the user, which is what the precompiled gem is for not needing; and a
  # libruby by name would refuse every Ruby whose libruby is named otherwise
  # or that has none (ruby-build, RVM and Docker images build them so).
  ALLOWED_NEEDED = /\A(libc|libm|libpthread|libdl|librt|libresolv|ld-linux[-\w]*)\.so/
  # GSSAPI with MIT Kerberos and Cyrus SASL built from their pinned sources
  # and linked in. No libruby: the running Ruby has its symbols.
  BUILD_ENV = { "SLUICE_LIBRDKAFKA_GSSAPI" => "static", "SLUICE_NO_LIBRUBY" => "1" }.freeze

  module_function

  # @return [String] the path of the platform gem
  def build(platform)
    extensions = TargetRuby.all(platform).to_h do |ruby|
      puts "sluice: the extension for #{ruby.label}, #{platform.name}"
      [ruby.minor, checked(compile(ruby, platform), platform)]
    end
    package(extensions, platform)
  end

  def checked(extension, platform)
    needed = needed_libraries(extension)
    leaked = needed.grep_v(ALLOWED_NEEDED)
    raise "#{extension} would load #{leaked.join(", ")}: a precompiled gem must not (needs: #{needed.join(", ")})" if leaked.any?

    machine = elf_machine(extension)
    raise "#{extension} is for #{machine}, not #{platform.name} (#{platform.machine})" if platform.machine && machine != platform.machine

    puts "sluice: #{extension} (#{machine}) loads only #{needed.join(", ")}"
    extension
  end

  # extconf.rb and make in a directory of their own per Ruby: the
  # checkout's lib/sluice/sluice_ext.so (the development build) is left
  # alone. librdkafka's build does not depend on the Ruby: the first
  # extconf.rb builds it into the cache, the others use it.
  def compile(ruby, platform)
    dir = File.join(ROOT, "tmp", "native", platform.name, ruby.minor)
    FileUtils.rm_rf(dir)
    FileUtils.mkdir_p(dir)
    Dir.chdir(dir) do
      run(BUILD_ENV.merge(platform.build_env), *ruby.extconf_command(File.join(ROOT, "ext", "sluice", "extconf.rb"), dir))
      run({}, "make", "-j#{Etc.nprocessors}")
      # Debug sections are most of its size (19 MB -> 9 MB); symbols stay for backtraces.
      run({}, platform.tool("strip"), "--strip-debug", "sluice_ext.#{RbConfig::CONFIG["DLEXT"]}")
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

  # readelf reads any architecture's ELF header: "AArch64", "Advanced Micro Devices X86-64".
  def elf_machine(extension)
    output, status = Open3.capture2("readelf", "-h", extension)
    raise "readelf -h #{extension} failed" unless status.success?

    output[/^\s*Machine:\s*(.+)$/, 1].strip
  end

  # The platform gem: the Ruby code, the sluice command, README, LICENSE, CHANGELOG and each
  # extension under lib/sluice/<ruby minor>/ (where lib/sluice.rb looks); no C sources, no
  # extconf.rb, no mini_portile2 dependency.
  # @param extensions [Hash{String => String}] Ruby minor => its extension
  def package(extensions, platform)
    binaries = extensions.to_h { |minor, extension| ["lib/sluice/#{minor}/#{File.basename(extension)}", extension] }
    spec = platform_spec(extensions.keys, binaries.keys, platform)
    # One per platform: .ci/run may cross-build the aarch64 gem in the background while the gems step
    # packages this machine's.
    stage = File.join(ROOT, "tmp", "native", platform.name, "stage")
    FileUtils.rm_rf(stage)
    spec.files.each do |file|
      FileUtils.mkdir_p(File.join(stage, File.dirname(file)))
      # preserve: exe/sluice keeps its executable bit in the package
      FileUtils.cp(binaries.fetch(file) { File.join(ROOT, file) }, File.join(stage, file), preserve: true)
    end
    FileUtils.mkdir_p(File.join(ROOT, "pkg"))
    path = File.join(ROOT, "pkg", spec.file_name)
    Dir.chdir(stage) { FileUtils.mv(Gem::Package.build(spec), path) }
    puts "sluice: #{path} (Ruby #{extensions.keys.join(", ")})"
    path
  end

  # From the oldest Ruby minor carried to before the one after the newest:
  # a minor in between without an extension (RubyGems cannot express "not
  # 3.2") is refused by lib/sluice.rb with a LoadError that names the ones
  # carried and the source gem; the description names them too.
  def platform_spec(minors, binaries, platform)
    SOURCE_SPEC.dup.tap do |spec|
      spec.platform = platform.gem_platform
      spec.required_ruby_version = [">= #{minors.first}", "< #{minors.last.succ}.dev"]
      spec.description = "#{spec.description} Precompiled for #{platform.name}#{glibc} and Ruby " \
                         "#{minors.join(", ")}; any other Ruby: gem install sluice --platform ruby."
      spec.extensions = []
      spec.dependencies.delete_if { |dependency| dependency.name == "mini_portile2" }
      spec.requirements = []
      spec.files = spec.files.grep_v(%r{\Aext/}) + binaries
    end
  end

  # The glibc the extensions were linked against, the oldest they load with: " (glibc 2.36+)"; "" elsewhere.
  # A cross toolchain's C library is this release's too (Debian 12's libc6-arm64-cross: 2.36).
  def glibc
    return "" unless defined?(Etc::CS_GNU_LIBC_VERSION)

    " (glibc #{Etc.confstr(Etc::CS_GNU_LIBC_VERSION)[/[\d.]+/]}+)"
  end
end

Gem::PackageTask.new(SluiceNativeGem::SOURCE_SPEC) { |package| package.need_tar = false }

desc "Build pkg/sluice-VERSION-x86_64-linux.gem and -aarch64-linux.gem (cross-compiled): precompiled for each " \
     "Ruby minor pinned (SLUICE_NATIVE_RUBIES), librdkafka linked in; SLUICE_NATIVE_PLATFORM=x86_64-linux " \
     "(or aarch64-linux) builds only that one"
task :native do
  platforms = SluiceNativeGem::Platform.all
  platforms.each(&:check_toolchain!) # both named before either is built
  platforms.each { |platform| SluiceNativeGem.build(platform) }
end
