# frozen_string_literal: true

require "mkmf"

# Build against the system librdkafka (Debian: librdkafka-dev). pkg-config is the
# source of truth for flags; the version floor is what the event API we use needs.
abort "librdkafka not found: install librdkafka-dev and pkg-config (bin/setup does this)" unless pkg_config("rdkafka")
unless try_compile(<<~C)
  #include <librdkafka/rdkafka.h>
  #if RD_KAFKA_VERSION < 0x020000ff
  #error "librdkafka >= 2.0 required"
  #endif
  int main(void) { return 0; }
C
  abort "librdkafka >= 2.0 is required"
end

# The selector backends, in order of preference; SLUICE_SELECTOR picks one.
# The portable ones use POSIX only (a pipe to interrupt a wait), so
# SLUICE_SELECTOR=poll on Linux builds the code macOS and the BSDs run.
SELECTORS = {
  "epoll" => -> { have_header("sys/epoll.h") && have_func("epoll_create1", "sys/epoll.h") },
  "kqueue" => -> { have_header("sys/event.h") && have_func("kqueue", %w[sys/types.h sys/event.h sys/time.h]) },
  "poll" => -> { have_header("poll.h") }
}.freeze
requested = ENV.fetch("SLUICE_SELECTOR", "")
abort "SLUICE_SELECTOR=#{requested}: unknown backend (#{SELECTORS.keys.join(", ")})" unless requested.empty? || SELECTORS.key?(requested)
selector = if requested.empty?
             SELECTORS.find { |_, available| available.call }&.first
           elsif SELECTORS.fetch(requested).call
             requested
           end
abort "SLUICE_SELECTOR=#{requested}: not available here" if selector.nil? && !requested.empty?
abort "no selector backend: this system has neither epoll, kqueue nor poll.h" unless selector
$defs << "-DSLUICE_SELECTOR_#{selector.upcase}"
# Ruby's own config.h defines HAVE_SYS_EVENTFD_H on Linux: our own name decides.
$defs << "-DSLUICE_WAKE_EVENTFD" if selector == "epoll" && have_header("sys/eventfd.h")
have_func("pipe2", "unistd.h")
message "sluice: selector backend #{selector}\n"

$CFLAGS << " -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers"
$CFLAGS << " -Werror" if ENV["SLUICE_WERROR"]
$CFLAGS << " -O0 -g -fsanitize=address -fno-omit-frame-pointer" if ENV["SLUICE_ASAN"]
$LDFLAGS << " -fsanitize=address" if ENV["SLUICE_ASAN"]

create_makefile("sluice/sluice_ext")
