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

have_header("sys/epoll.h") or abort "sluice needs Linux epoll"
have_header("sys/eventfd.h") or abort "sluice needs Linux eventfd"
have_func("pipe2", "unistd.h")

$CFLAGS << " -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers"
$CFLAGS << " -Werror" if ENV["SLUICE_WERROR"]
$CFLAGS << " -O0 -g -fsanitize=address -fno-omit-frame-pointer" if ENV["SLUICE_ASAN"]
$LDFLAGS << " -fsanitize=address" if ENV["SLUICE_ASAN"]

create_makefile("sluice/sluice_ext")
