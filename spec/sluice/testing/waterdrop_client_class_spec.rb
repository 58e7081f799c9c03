# frozen_string_literal: true

# WaterDrop's client_class integration scenario (waterdrop
# test/integrations/fork_finalizer_close_safety), through the migration
# guide's mapping: WaterDrop:: becomes Sluice::, the client is built with the
# librdkafka properties (not the producer), and its #destroy is WaterDrop's
# #close. A tracing client records every close with the pid that ran it; a
# forked child that never touches the inherited producer must not close the
# parent's client at its exit. No broker: the Dummy client contacts none.
RSpec.describe "WaterDrop's client_class scenario, renamed" do
  it "a forked child's exit does not close the parent's client; the parent's close does, once" do
    output, status = run_scenario(<<~RUBY, timeout: 30)
      trace = IO.pipe
      TRACE = trace.last
      class TracingClient < Sluice::Clients::Dummy
        def initialize(kafka_pairs)
          super
          @built_pid = Process.pid
        end

        def destroy(*)
          TRACE.write("close ran_in=\#{Process.pid} built_in=\#{@built_pid}\\n")
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
      puts "child=\#{child} parent=\#{Process.pid} closes=\#{lines.inspect}"
    RUBY
    expect(status).to be_success, output
    child, parent = output[/child=(\d+) parent=(\d+)/, 0].scan(/\d+/)
    closes = output[/closes=(.*)$/, 1]
    expect(closes).not_to include("ran_in=#{child}")
    expect(closes).to eq(["close ran_in=#{parent} built_in=#{parent}"].inspect)
  end
end
