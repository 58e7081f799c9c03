# frozen_string_literal: true

# What every scenario file has (through setup.rb, which defines BROKERS and MODE and loads sluice first).
require "json"
$stdout.sync = true

# The scenario's outcome, read back by the spec (one line, JSON).
def result(data)
  puts("SCENARIO-RESULT #{JSON.generate(data)}")
end

def make_producer(mode: MODE, kafka: {}, **settings)
  Sluice::Producer.new do |config|
    config.kafka = { "bootstrap.servers": BROKERS, "linger.ms": 1 }.merge(kafka)
    config.polling.mode = mode
    config.logger = Logger.new($stderr, level: Logger::ERROR)
    settings.each { |name, value| config.public_send(:"#{name}=", value) }
    yield config if block_given?
  end
end

def sluice_thread_names = Thread.list.select(&:alive?).map(&:name).compact.grep(/\Asluice\./).sort
def os_threads = Dir.children("/proc/self/task").size
def fds = Dir.children("/proc/self/fd").size
