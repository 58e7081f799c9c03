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
    # gem platform => the GNU triplet of its toolchain, its Debian architecture, and
    # the machine `readelf -h` must report for its extensions
    CROSS = {
      "aarch64-linux" => { triplet: "aarch64-linux-gnu", debian_arch: "arm64", machine: "AArch64" }
    }.freeze
    NATIVE_MACHINES = { "x86_64" => "Advanced Micro Devices X86-64", "aarch64" => "AArch64" }.freeze

    # @raise [RuntimeError] for a platform neither this machine's nor in CROSS
    def self.current
      name = ENV.fetch(ENV_NAME, "")
      return new(Gem::Platform.local.to_s) if name.empty? || name == Gem::Platform.local.to_s

      new(name, CROSS.fetch(name) { raise "#{ENV_NAME}=#{name}: not this machine's and not one cross-compiled here (#{CROSS.keys.join(", ")})" })
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
  end
end
