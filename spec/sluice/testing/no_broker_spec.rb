# frozen_string_literal: true

require "open3"
require "socket"
require "tmpdir"

# Issue 30's bar: an application spec using Sluice::Testing runs with no
# broker at all. It runs here as a user's would (its own process, its own
# rspec), with bootstrap.servers naming a port we listen on: any librdkafka
# client would connect to it at once. Nothing may.
RSpec.describe "An application spec using Sluice::Testing", timeout: 90 do
  around do |example|
    @server = TCPServer.new("127.0.0.1", 0)
    example.run
  ensure
    @server.close
  end

  let(:brokers) { "127.0.0.1:#{@server.addr[1]}" }

  def connected?(seconds) = !IO.select([@server], nil, nil, seconds).nil?

  application_spec = <<~RUBY
    require "sluice/testing"

    # What the application would have in lib/: a consumer that forwards orders.
    class Forwarder
      def initialize(consumer, producer) = (@consumer, @producer = consumer, producer)

      def run
        @consumer.subscribe("orders")
        @consumer.each_message do |message|
          raise "flaky" if message.payload == "retry-me" && (@failed = !@failed)

          @producer.produce_sync(topic: "shipments", key: message.key, payload: message.payload.upcase)
        end
      end
    end

    RSpec.describe Forwarder do
      let(:producer) do
        Sluice::Testing.producer(partitions: { "shipments" => 4 }) { |config| config.kafka = { "bootstrap.servers": ENV.fetch("BROKERS") } }
      end
      let(:consumer) { Sluice::Testing::Consumer.new }

      after { producer.close && consumer.close }

      it "forwards every order, again after a failure" do
        consumer.feed(topic: "orders", key: "a", payload: "first")
        consumer.feed(topic: "orders", key: "b", payload: "retry-me")
        forwarder = Forwarder.new(consumer, producer)

        expect { forwarder.run }.to raise_error("flaky")
        forwarder.run

        expect(producer).to have_produced(topic: "shipments", payload: "FIRST").once
        expect(producer).to have_produced(topic: "shipments", key: "b", payload: "RETRY-ME").once
        consumer.commit
        expect(consumer.committed).to eq("orders" => { 0 => 2 })
      end
    end
  RUBY

  it "passes without connecting to anything" do
    lib = File.expand_path("../../../lib", __dir__)
    output, status = Dir.mktmpdir do |dir|
      File.write(File.join(dir, "forwarder_spec.rb"), application_spec)
      Open3.capture2e({ "BROKERS" => brokers }, RbConfig.ruby, "-I", lib, "-S", "rspec", "forwarder_spec.rb", chdir: dir)
    end

    expect(status).to be_success, output
    expect(output).to include("1 example, 0 failures")
    expect(connected?(0)).to be(false)
  end

  it "would have seen a real producer connect (the check above can fail)" do
    producer = build_producer(kafka: { "bootstrap.servers": brokers })
    producer.produce_async(topic: "orders", payload: "x")
    expect(connected?(20)).to be(true)
    producer.close!
  end
end
