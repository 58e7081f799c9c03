# frozen_string_literal: true

# A scenario of spec/sluice/testing/waterdrop_client_class_spec.rb, in a process of its own: WaterDrop's
# fork_finalizer_close_safety through the migration guide's mapping. Prints the closes it traced.
require_relative "../setup"

trace = IO.pipe
TRACE = trace.last
class TracingClient < Sluice::Clients::Dummy
  def initialize(kafka_pairs)
    super
    @built_pid = Process.pid
  end

  def destroy(*)
    TRACE.write("close ran_in=#{Process.pid} built_in=#{@built_pid}\n")
    super
  end
end

producer = Sluice::Producer.new do |config|
  config.client_class = TracingClient
  config.kafka = { "bootstrap.servers": "127.0.0.1:1" } # nothing listens: none is contacted
  config.logger = Logger.new($stdout, level: Logger::ERROR)
end
producer.produce_sync(topic: "wd08", payload: "parent")
child = fork {} # nothing: the child exits, running at_exit hooks and finalizers
Process.wait(child)
producer.close
TRACE.close
lines = trace.first.read.lines.map(&:strip)
puts "child=#{child} parent=#{Process.pid} closes=#{lines.inspect}"
