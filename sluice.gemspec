# frozen_string_literal: true

require_relative "lib/sluice/version"

Gem::Specification.new do |spec|
  spec.name = "sluice"
  spec.version = Sluice::VERSION
  spec.summary = "Kafka producers over librdkafka, every producer polled from one thread"
  spec.description = "A WaterDrop-style Kafka producer API on a thin C binding to librdkafka. " \
                     "Each producer's event queue wakes a pipe; one poller thread waits on all pipes."
  spec.license = "MIT"
  spec.authors = ["sluice authors"]
  spec.required_ruby_version = ">= 3.1"
  spec.requirements = ["librdkafka >= 2.0 with its headers, found through pkg-config", "a C compiler and make"]
  # What users get: the Ruby API and the C sources it is built from at install
  # time, never specs, build outputs or a compiled extension.
  spec.files = Dir["lib/**/*.rb", "ext/**/*.{c,h}", "ext/**/extconf.rb", "README.md", "LICENSE", "CHANGELOG.md"]
  spec.extensions = ["ext/sluice/extconf.rb"]
  spec.require_paths = ["lib"]
end
