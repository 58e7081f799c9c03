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
  spec.files = Dir["lib/**/*.rb", "ext/**/*.{c,h,rb}", "README.md"]
  spec.extensions = ["ext/sluice/extconf.rb"]
  spec.require_paths = ["lib"]
end
