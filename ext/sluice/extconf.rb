# frozen_string_literal: true

require "mkmf"
require "shellwords"
require_relative "librdkafka_recipe"

# Builds the pinned librdkafka (Sluice::LIBRDKAFKA, lib/sluice/version.rb)
# from its release archive, against zlib, zstd and OpenSSL built from their
# own pinned sources (Sluice::LIBRDKAFKA_DEPENDENCIES), and links it all into
# the extension; or, on request, builds against the system's librdkafka
# (>= 2.0), found through pkg-config.
#
#   SLUICE_USE_SYSTEM_LIBRDKAFKA=1  the system's librdkafka (gem install sluice -- --use-system-librdkafka)
#   SLUICE_LIBRDKAFKA_VERSION=V     another pinned release (Sluice::LIBRDKAFKA_OPT_IN: 2.15.0), cached beside the default's
#   SLUICE_SHARED_SOURCES=DIR       where else to look for the archives (default: ../shared/sources beside the checkout)
#   SLUICE_LIBRDKAFKA_ARCHIVE=PATH  the release archive to build from (offline installs); checked by SHA-256
#   SLUICE_LIBRDKAFKA_URL=URL       where to download it from (a mirror; default: the GitHub release, then Debian's); checked too
#   SLUICE_{ZLIB,ZSTD,OPENSSL,KRB5,CYRUS_SASL}_ARCHIVE=PATH, ..._URL=URL  the same for librdkafka's dependencies
#   SLUICE_LIBRDKAFKA_GSSAPI=0|1|static  without SASL GSSAPI / with the system's Cyrus SASL / with MIT Kerberos and
#                                   Cyrus SASL built from pinned sources and linked in (default: the system's if installed)
#   SLUICE_LIBRDKAFKA_JOBS=N        make -j for librdkafka and its dependencies (default: the number of CPUs)
#   SLUICE_LIBRDKAFKA_CACHE=DIR     where builds are kept (default: tmp/librdkafka of the checkout or gem)
#   SLUICE_WERROR=1                 compiler warnings are errors (CI)
#   SLUICE_SELECTOR=NAME            epoll, kqueue or poll (default: the first this system has)
#   SLUICE_ASAN=1                   AddressSanitizer build (bin/asan)
#   SLUICE_NO_LIBRUBY=1             link no libruby (the precompiled gem: rake native)
#   PKG_CONFIG_PATH=DIR             with the system's: another librdkafka (the directory holding its rdkafka.pc)

def fail_build(message) = abort("sluice: #{message}")

INSTALL_HINT = "install librdkafka >= 2.0 with its headers (Debian/Ubuntu: apt-get install librdkafka-dev; " \
               "macOS: brew install librdkafka), or set PKG_CONFIG_PATH to the directory holding its rdkafka.pc; " \
               "or build the bundled librdkafka (leave SLUICE_USE_SYSTEM_LIBRDKAFKA unset)"
ROOT = File.expand_path("../..", __dir__)
SYSTEM_LIBRDKAFKA = ENV["SLUICE_USE_SYSTEM_LIBRDKAFKA"] == "1" || arg_config("--use-system-librdkafka")

# The selector backends, in order of preference; SLUICE_SELECTOR picks one.
# The portable ones use POSIX only (a pipe to interrupt a wait), so
# SLUICE_SELECTOR=poll on Linux builds the code macOS and the BSDs run.
SELECTORS = {
  "epoll" => -> { have_header("sys/epoll.h") && have_func("epoll_create1", "sys/epoll.h") },
  "kqueue" => -> { have_header("sys/event.h") && have_func("kqueue", %w[sys/types.h sys/event.h sys/time.h]) },
  "poll" => -> { have_header("poll.h") }
}.freeze
requested = ENV.fetch("SLUICE_SELECTOR", "")
fail_build "SLUICE_SELECTOR=#{requested}: unknown backend (#{SELECTORS.keys.join(", ")})" unless requested.empty? || SELECTORS.key?(requested)

# librdkafka's headers are third-party code: included as system headers, so
# warnings in them (rdkafka.h of 2.15 has one) never fail a strict build, and
# our own warnings stay as strict as they are.
def system_librdkafka
  pkg_config_command = with_config("pkg-config", RbConfig::CONFIG["PKG_CONFIG"] || "pkg-config")
  unless find_executable(pkg_config_command)
    fail_build "pkg-config not found: it locates librdkafka. Install it (Debian/Ubuntu: apt-get install pkg-config; " \
               "macOS: brew install pkg-config)"
  end
  own_incflags = $INCFLAGS.dup
  fail_build "pkg-config knows no librdkafka (rdkafka.pc): #{INSTALL_HINT}" unless pkg_config("rdkafka")
  $INCFLAGS = own_incflags + Shellwords.split($INCFLAGS.delete_prefix(own_incflags)).map do |flag|
    flag.start_with?("-I") ? " -isystem #{Shellwords.escape(flag.delete_prefix("-I"))}" : " #{Shellwords.escape(flag)}"
  end.join
end

# The pinned release, built once (kept under tmp/librdkafka of the checkout or
# the installed gem) and linked in whole: librdkafka.a and the archives of
# its dependencies, their symbols kept out of the extension's exports
# (--exclude-libs), so the OpenSSL linked in never stands in for the one
# Ruby's openssl extension loads.
# Where the builds are kept; through a link, the cache's own path: a build's key holds the paths its steps
# name (its dependencies' prefixes), so clones that share one cache by a link (bin/setup's) share its builds
# only that way.
def librdkafka_cache
  cache = ENV.fetch("SLUICE_LIBRDKAFKA_CACHE", File.join(ROOT, "tmp", "librdkafka"))
  File.exist?(cache) ? File.realpath(cache) : cache
end

# Sources no registry serves, beside a checkout on this project's machines (../shared/sources: librdkafka
# 2.15.0's tag archive); verified like any archive found or downloaded.
SHARED_SOURCES = ENV.fetch("SLUICE_SHARED_SOURCES", File.expand_path("../shared/sources", ROOT))

def bundled_librdkafka
  cache = librdkafka_cache
  build = SluiceBuild::Librdkafka.new(cache_root: cache, archive_dirs: [File.join(cache, "archives"), SHARED_SOURCES]).build
  # An installed gem (no checkout around it: no .git, no Rakefile) needs none
  # of the build once the extension is linked: `make install` removes it.
  $sluice_prune = cache if !ENV.key?("SLUICE_LIBRDKAFKA_CACHE") && %w[.git Rakefile].none? { |name| File.exist?(File.join(ROOT, name)) }
  $INCFLAGS << " -isystem #{Shellwords.escape(build.include_dir)}"
  $LOCAL_LIBS << " #{Shellwords.escape(build.archive)} #{build.libs}"
  $LDFLAGS << " -Wl,--exclude-libs,ALL" if RbConfig::CONFIG["host_os"].include?("linux")
  message "sluice: librdkafka #{build.version} linked in with #{build.dependencies.join(", ")}, " \
          "built with #{build.built_with.join(" ")}\n"
rescue SluiceBuild::Error => e
  fail_build e.message
end

# A compiler first: without one neither librdkafka nor the extension builds,
# and what fails later (mini_portile2's configure, mkmf's header checks) says little.
compiles = begin
  try_link("int main(void) { return 0; }")
rescue RuntimeError # mkmf's "The compiler failed to generate an executable file"
  false
end
unless compiles
  fail_build "no working C compiler: #{RbConfig::CONFIG["CC"]} could not build a test program (mkmf.log says why). " \
             "Install one (Debian/Ubuntu: apt-get install build-essential; Alpine: apk add build-base; macOS: " \
             "xcode-select --install), or install the precompiled gem, which compiles nothing " \
             "(x86_64 or aarch64 Linux, glibc 2.36+, Ruby 3.1, 3.3 or 3.4)"
end

# The selector next, before any librdkafka step: its checks need only the
# compiler, and a refused one must not wait for (or start) a librdkafka build.
selector = if requested.empty?
             SELECTORS.find { |_, available| available.call }&.first
           elsif SELECTORS.fetch(requested).call
             requested
           end
fail_build "SLUICE_SELECTOR=#{requested}: not available here" if selector.nil? && !requested.empty?
fail_build "no selector backend: this system has neither epoll, kqueue nor poll.h" unless selector

SYSTEM_LIBRDKAFKA ? system_librdkafka : bundled_librdkafka

fail_build "librdkafka/rdkafka.h not found: #{INSTALL_HINT}" unless have_header("librdkafka/rdkafka.h")
header_version = try_constant("RD_KAFKA_VERSION", "librdkafka/rdkafka.h")
version = header_version && [24, 16, 8].map { |shift| (header_version >> shift) & 0xff }.join(".")
unless header_version && header_version >= 0x020000ff
  fail_build "librdkafka >= 2.0 required, found #{version || "an unknown version"}: #{INSTALL_HINT}"
end
wanted = SYSTEM_LIBRDKAFKA || SluiceBuild::Librdkafka.pin.version
fail_build "the bundled build wanted librdkafka #{wanted}, its headers say #{version}" if !SYSTEM_LIBRDKAFKA && version != wanted
message "sluice: librdkafka #{version} headers (#{SYSTEM_LIBRDKAFKA ? "the system's" : "bundled"})\n"

$defs << "-DSLUICE_SELECTOR_#{selector.upcase}"
# Each partition read from its own queue (partition_queues.c): only with the bundled build, whose patch 0015
# makes those queues share the prefetch limits (without it, each would prefetch up to all of them).
$defs << "-DSLUICE_OWN_PARTITION_QUEUES" unless SYSTEM_LIBRDKAFKA
# Ruby's own config.h defines HAVE_SYS_EVENTFD_H on Linux: our own name decides.
$defs << "-DSLUICE_WAKE_EVENTFD" if selector == "epoll" && have_header("sys/eventfd.h")
have_func("pipe2", "unistd.h")
have_header("librdkafka/rdkafka_mock.h", "librdkafka/rdkafka.h") # TestHooks.mock_* (test_hooks.c), Native::MockCluster (mock_cluster.c)
# MockCluster#group_initial_rebalance_delay_ms (mock_cluster.c): the bundled librdkafka has it, 2.0.2 not
have_func("rd_kafka_mock_group_initial_rebalance_delay_ms", %w[librdkafka/rdkafka.h librdkafka/rdkafka_mock.h])
message "sluice: selector backend #{selector}\n"

# After the checks: mkmf's probe programs are not warning-free.
$CFLAGS << " -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers"
$CFLAGS << " -Werror" if ENV["SLUICE_WERROR"]
$CFLAGS << " -O0 -g -fsanitize=address -fno-omit-frame-pointer" if ENV["SLUICE_ASAN"]
$LDFLAGS << " -fsanitize=address" if ENV["SLUICE_ASAN"]

# The precompiled gem's extension (rake native) names no libruby: the Ruby
# loading it provides those symbols, whatever its libruby is called
# (Debian's libruby-3.1.so.3.1, ruby-build's and RVM's libruby.so.3.1) or
# whether it has one at all (a --disable-shared Ruby, as some Docker images).
# Here, after the checks: their test programs link this Ruby's libruby as
# any build's do. (For another Ruby's headers, rake native's cross rbconfig
# empties LIBRUBYARG before the checks: that libruby cannot link here.)
$LIBRUBYARG = "" if ENV["SLUICE_NO_LIBRUBY"] == "1"

create_makefile("sluice/sluice_ext")

# After RubyGems' `make install` the extension is linked (statically) and
# copied: librdkafka's build (25 MB) would only take room in the gem.
if $sluice_prune
  File.open("Makefile", "a") do |makefile|
    makefile.puts("", "install: sluice-prune-librdkafka", "sluice-prune-librdkafka: install-so",
                  "\t-$(Q) $(RM_RF) #{Shellwords.escape($sluice_prune)}")
  end
end
