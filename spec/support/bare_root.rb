# frozen_string_literal: true

require "fileutils"

module Packaging
  # A Debian root made with debootstrap (--variant=minbase) holding Ruby and
  # nothing to build with: where the precompiled gem must install and load.
  # Kept in ~/.cache/sluice/roots/bare-SUITE, since debootstrap is most of
  # what such a check costs; made by bin/make-root, which makes every root
  # the checks use: its packages are installed again only when the list
  # changes (a stamp). The gem an install leaves is uninstalled before and
  # after (#uninstall), so the root stays bare. /proc and /dev are mounted
  # while it is in use (bin/make-root: /dev bound recursively and made a
  # slave, so unmounting it never reaches the host's /dev); unmounted again
  # by #release, or at exit.
  class BareRoot
    PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
    MAKE_ROOT = File.expand_path("../../bin/make-root", __dir__)
    ROOTS = File.join(ENV.fetch("XDG_CACHE_HOME", File.join(Dir.home, ".cache")), "sluice", "roots")

    attr_reader :path

    # @param packages [Array<String>] the suite's packages to install (Ruby)
    # @param debs [Array<String>] .deb files to install besides (a Ruby the suite does not have)
    def initialize(suite, packages:, debs: [], mirror: ENV.fetch("SLUICE_DEBIAN_MIRROR", "http://deb.debian.org/debian"))
      @suite = suite
      @packages = packages
      @debs = debs
      @mirror = mirror
      @path = File.join(ROOTS, "bare-#{suite}")
    end

    # Made (or taken from the cache), mounted, its packages installed; held (flock) until #release.
    def prepare
      FileUtils.mkdir_p(ROOTS)
      @lock = File.open("#{@path}.lock", File::RDWR | File::CREAT, 0o644)
      @lock.flock(File::LOCK_EX)
      Packaging.run({ "SLUICE_DEBIAN_MIRROR" => @mirror }, MAKE_ROOT, @path, @suite, ".sluice-bare", wanted, *@packages, *@debs)
      at_exit { unmount } unless @mounted_before
      @mounted_before = true
      self
    end

    def release
      unmount
      @lock&.close
    end

    # @return [String] the command's output; raises unless it succeeded
    def run(*command)
      Packaging.run({}, "chroot", @path, "/usr/bin/env", "-i", "PATH=#{PATH}", "HOME=/root", "LANG=C.UTF-8", *command)
    end

    # @return [Array<String>] what could build an extension here (none, in a bare root)
    def tools
      run("sh", "-c", "for tool in cc gcc make pkg-config; do command -v $tool; done; " \
                      "find / -xdev -name 'librdkafka*' -o -xdev -name 'rdkafka.h'; true").split
    end

    # Copies a file into the root's /tmp.
    # @return [String] its path inside the root
    def copy_in(file)
      FileUtils.cp(file, File.join(@path, "tmp"))
      "/tmp/#{File.basename(file)}"
    end

    def uninstall(gem_command, name) = run("sh", "-c", "#{gem_command} uninstall --all --executables --ignore-dependencies #{name} || true")

    private

    def wanted = [@suite, @mirror, *@packages, *@debs.map { |deb| File.basename(deb) }].join(" ")

    def unmount = system(MAKE_ROOT, "unmount", @path)
  end
end
