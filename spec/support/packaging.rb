# frozen_string_literal: true

require "json"
require "open3"

# What the packaging specs (spec/integration/packaging) share: running a
# command with nothing of the checkout on its load path, the script that uses
# an installed gem, and the install times they print side by side at the end.
module Packaging
  ROOT = File.expand_path("../..", __dir__)
  INSTALL_TIMES = {} # rubocop:disable Style/MutableConstant -- what => seconds, filled by the specs

  # Run outside the checkout: nothing of the tree (RUBYLIB, RUBYOPT, -I, the
  # working directory) can stand in for the installed gem.
  def self.run(env, *command, chdir: nil)
    clean = { "RUBYLIB" => nil, "RUBYOPT" => nil, "BUNDLE_GEMFILE" => nil }
    output, status = Open3.capture2e(clean.merge(env), *command, **{ chdir: chdir }.compact)
    raise "#{command.join(" ")} failed (#{status}):\n#{output}" unless status.success?

    output
  end

  # @return [Float] seconds the block took
  def self.timed
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    yield
    Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
  end

  # A script for `ruby -e` that loads the installed gem, produces `count`
  # messages to partition 0 of `topic`, reads them back from the first one's
  # offset, and prints one JSON line: what it loaded (the gem, its extension,
  # the libruby mapped into the process) and what came back.
  # @param kafka [Hash] more of the clients' configuration (GSSAPI's)
  def self.round_trip_script(brokers, topic, count, kafka: {})
    <<~RUBY
      require "json"
      require "sluice"
      kafka = #{{ "bootstrap.servers": brokers }.merge(kafka).inspect}
      producer = Sluice::Producer.new { |config| config.kafka = kafka }
      payloads = Array.new(#{count}) { |i| "message \#{i}" }
      reports = producer.produce_many_sync(payloads.map { |payload| { topic: #{topic.inspect}, partition: 0, payload: payload } })
      producer.close
      consumer = Sluice::Consumer.new { |config| config.kafka = kafka.merge("group.id": "sluice-spec-gem-\#{Process.pid}") }
      consumer.assign(#{topic.inspect} => { 0 => reports.first.offset })
      read = []
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 30
      while read.size < payloads.size && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
        message = consumer.poll(500)
        read << message.payload if message
      end
      consumer.close
      extension = $LOADED_FEATURES.grep(/sluice_ext/).first
      libruby = File.readlines("/proc/self/maps").map { |line| line.split[5] }.compact.grep(/libruby/).uniq # what the process runs
      puts JSON.generate("gem_path" => Gem.loaded_specs.fetch("sluice").full_gem_path, "loaded" => $LOADED_FEATURES.grep(/sluice/),
                         "libruby" => libruby,
                         "extension" => extension, "ldd" => `ldd \#{extension}`, "backend" => Sluice::Native::Selector.backend,
                         "librdkafka" => Sluice.librdkafka_version, "errors" => reports.map { |report| report.error&.code }.compact,
                         "produced" => payloads.size, "read_back" => read == payloads)
    RUBY
  end
end

RSpec.configure do |config|
  config.after(:suite) do
    next if Packaging::INSTALL_TIMES.empty?

    puts "\ngem install: #{Packaging::INSTALL_TIMES.map { |what, seconds| format("%s %.1f s", what, seconds) }.join(", ")}"
  end
end
