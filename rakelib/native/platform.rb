# frozen_string_literal: true

require "rubygems"
require_relative "../../ext/sluice/recipe/target"

module SluiceNativeGem
  # The platform a precompiled gem is for: this machine's (the default), or
  # another one cross-compiled here (SLUICE_NATIVE_PLATFORM=aarch64-linux),
  # by Debian's cross toolchain (crossbuild-essential-arm64) against
  # Debian's headers of each Ruby for that architecture (DebianRuby). Either
  # way the C library is the building system's release's (Debian 12: glibc
  # 2.36), so the gem's glibc floor is the same.
  class Platform
    ENV_NAME = "SLUICE_NATIVE_PLATFORM"
    # gem platform => the GNU triplet of its toolchain, the Debian package that installs it, its
    # Debian architecture, and the machine `readelf -h` must report for its extensions
    CROSS = {
      "aarch64-linux" => { triplet: "aarch64-linux-gnu", package: "crossbuild-essential-arm64", debian_arch: "arm64",
                           machine: "AArch64" }
    }.freeze
    NATIVE_MACHINES = { "x86_64" => "Advanced Micro Devices X86-64", "aarch64" => "AArch64" }.freeze

    # @return [Array<Platform>] SLUICE_NATIVE_PLATFORM's, else this machine's and each one cross-compiled here
    # @raise [RuntimeError] for a platform neither this machine's nor in CROSS
    def self.all
      name = ENV.fetch(ENV_NAME, "")
      return [named(name)] unless name.empty?

      [named(Gem::Platform.local.to_s), *(CROSS.keys - [Gem::Platform.local.to_s]).map { |cross| named(cross) }]
    end

    def self.named(name)
      local = Gem::Platform.local.to_s
      return new(name) if name == local
      return new(name, CROSS.fetch(name)) if CROSS.key?(name)

      raise "#{ENV_NAME}=#{name}: neither this machine's nor one cross-compiled here (#{[local, *CROSS.keys].uniq.join(", ")})"
    end

    attr_reader :name

    def initialize(name, cross = nil)
      @name = name
      @cross = cross
    end

    def cross? = !@cross.nil?

    def gem_platform = Gem::Platform.new(@name)

    # What each Ruby's headers are taken for (DebianRuby::PINS); this machine is amd64.
    def debian_arch = cross? ? @cross.fetch(:debian_arch) : "amd64"

    def machine = cross? ? @cross.fetch(:machine) : NATIVE_MACHINES[RbConfig::CONFIG["host_cpu"]]

    # The recipes' cross target: librdkafka and its dependencies built with this toolchain.
    def build_env = cross? ? { SluiceBuild::Target::ENV_NAME => @cross.fetch(:triplet) } : {}

    # The toolchain's binutils: strip must know the extension's architecture.
    def tool(name) = cross? ? "#{@cross.fetch(:triplet)}-#{name}" : name

    # Before anything is built: a missing cross compiler would otherwise fail minutes later, deep in
    # zlib's configure, with a message that names neither the platform nor the package.
    # @raise [RuntimeError] naming what to install, and how to build the other gem without it
    def check_toolchain!
      return unless cross?

      missing = %w[gcc strip].map { |name| tool(name) }.reject { |tool| on_path?(tool) }
      return if missing.empty?

      raise "rake native cross-compiles the #{@name} gem and needs #{missing.join(" and ")}, not installed: " \
            "apt-get install #{@cross.fetch(:package)} (or build only this machine's gem: " \
            "#{ENV_NAME}=#{Gem::Platform.local} rake native)"
    end

    private

    def on_path?(tool) = ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).any? { |dir| File.executable?(File.join(dir, tool)) }
  end
end
