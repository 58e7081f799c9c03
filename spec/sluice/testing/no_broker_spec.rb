# frozen_string_literal: true

require "fileutils"
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

  application_spec = File.expand_path("../../support/scenarios/testing/forwarder_application.rb", __dir__)

  it "passes without connecting to anything" do
    lib = File.expand_path("../../../lib", __dir__)
    output, status = Dir.mktmpdir do |dir|
      FileUtils.cp(application_spec, File.join(dir, "forwarder_spec.rb"))
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
