# frozen_string_literal: true

require_relative "lib/sluice/version"

Gem::Specification.new do |spec|
  spec.name = "sluice"
  spec.version = Sluice::VERSION
  spec.summary = "Kafka producers and consumers over librdkafka, every client polled from one thread"
  spec.description = "A WaterDrop-style Kafka producer and an rdkafka-style consumer on a thin C binding to librdkafka " \
                     "(a pinned release, built and linked in). Each client's event queue wakes a pipe; one poller thread " \
                     "waits on all pipes."
  spec.license = "MIT"
  spec.authors = ["sluice authors"]
  spec.required_ruby_version = ">= 3.1"
  spec.requirements = ["a C compiler, make and perl (the bundled librdkafka's build, with zlib, zstd and OpenSSL from pinned sources)",
                       "or librdkafka >= 2.0 with its headers through pkg-config, with SLUICE_USE_SYSTEM_LIBRDKAFKA=1"]
  # What users get: the Ruby API, the `sluice` command and the C sources it is
  # built from at install time, never specs, build outputs or a compiled extension.
  spec.files = Dir["lib/**/*.rb", "exe/sluice", "ext/**/*.{c,h,rb,patch}", "README.md", "LICENSE", "CHANGELOG.md"]
  spec.bindir = "exe"
  spec.executables = ["sluice"]
  spec.extensions = ["ext/sluice/extconf.rb"]
  spec.require_paths = ["lib"]
  # Builds the pinned librdkafka and its dependencies at install time (ext/sluice/librdkafka_recipe.rb).
  spec.add_dependency "mini_portile2", "~> 2.8"
end
