# frozen_string_literal: true

require "socket"

# A close keeps its timeout while another thread is blocked in a read that
# librdkafka cannot wake (an Admin's metadata, a Consumer's committed
# offsets), waits for a commit's answer or polls (a ShareConsumer), against a
# broker that accepts connections and never answers. Before, an Admin had no
# close timeout and waited for the read's current ask, a Consumer's close
# waited for the whole committed or commit call (max_wait_timeout), and a
# ShareConsumer's for the whole poll (its reader took the lock again at once
# after each slice).
RSpec.describe "Closing while another thread is blocked in a read the brokers never answer", :kafka do
  include PollingScenarios

  # s: librdkafka's teardown and scheduling
  def margin = 0.6

  # s: one blocking ask, after which the blocked call sees the close
  def ask = Sluice::Shared::RefusableRead::SLICE / 1000.0

  around do |example|
    @silent = TCPServer.new("127.0.0.1", 0) # the kernel accepts; nobody answers
    example.run
  ensure
    @silent.close
  end

  let(:silent_brokers) { "127.0.0.1:#{@silent.addr[1]}" }

  def build_admin
    Sluice::Admin.new do |config|
      config.kafka = { "bootstrap.servers": silent_brokers }
      config.polling.mode = TestKafka::MODE
      config.max_wait_timeout = 15_000
      config.logger = Logger.new(nil)
    end
  end

  # The thread runs the call in the background, its exception as its value;
  # returned once it waits in method (a thread in a native call without the
  # GVL reads as "sleep", the call its backtrace's top).
  def blocked(method)
    thread = Thread.new do
      yield
    rescue StandardError => e
      e
    end
    spin_until(what: "#{method} waiting") { thread.status == "sleep" && thread.backtrace&.first&.end_with?("`#{method}'") }
    thread
  end

  def ended_with(thread, error)
    expect(thread.join(ask + margin)).to be_truthy, "the blocked call did not end within one ask of the close"
    expect(thread.value).to be_a(error)
  end

  it "an Admin's close from another thread returns within its timeout; the read raises AdminClosedError" do
    admin = build_admin
    reader = blocked("describe") { admin.topics }
    expect_within(0.2 + margin, guards: "the close waiting for the blocked read's ask past its timeout") do
      expect(admin.close(timeout: 200)).to be_nil
    end
    expect(admin).to be_closed
    ended_with(reader, Sluice::Errors::AdminClosedError)
  end

  it "an Admin's close from a signal handler returns within its timeout" do
    admin = build_admin
    reader = blocked("describe") { admin.topics }
    closed = Queue.new
    previous = Signal.trap("USR2") { closed << admin.close(timeout: 200) }
    expect_within(0.2 + margin, guards: "the close from a trap waiting for the blocked read past its timeout") do
      Process.kill("USR2", Process.pid)
      pop_within(closed)
    end
    expect(admin).to be_closed
    ended_with(reader, Sluice::Errors::AdminClosedError)
  ensure
    Signal.trap("USR2", previous || "DEFAULT")
    admin&.close
  end

  it "a waiting Admin request raises AdminClosedError at once" do
    admin = build_admin
    creator = blocked("sleep") { admin.create_topic("sluice-spec-never-created") }
    expect_within(0.2 + margin, guards: "the close waiting for a request nobody answers") { admin.close(timeout: 200) }
    expect(creator.join(margin)).to be_truthy
    expect(creator.value).to be_a(Sluice::Errors::AdminClosedError)
  end

  it "a ShareConsumer's close returns within its timeout while another thread polls; the poll raises ConsumerClosedError" do
    skip "needs librdkafka 2.15.0's share consumer" unless Sluice::Native::ShareConsumer.supported?

    consumer = Sluice::ShareConsumer.new do |config|
      config.kafka = { "bootstrap.servers": silent_brokers, "group.id": "sluice-spec-share-silent" }
      config.logger = Logger.new(nil)
    end
    consumer.subscribe("sluice-spec-silent")
    reader = blocked("poll") { consumer.poll(15_000) }
    expect_within(1.0 + margin, guards: "the close kept out of the lock the polling thread takes again at once") do
      expect(consumer.close(1_000)).to be(true)
    end
    ended_with(reader, Sluice::Errors::ConsumerClosedError)
  ensure
    consumer&.close(1_000)
  end

  it "a Consumer's close returns within its timeout while another thread asks for committed offsets" do
    consumer = build_consumer("bootstrap.servers": silent_brokers) { |config| config.max_wait_timeout = 15_000 }
    consumer.assign("sluice-spec-silent" => [0])
    asker = blocked("committed") { consumer.committed }
    expect_within(1.0 + margin, guards: "the close waiting for the whole committed call (max_wait_timeout)") do
      consumer.close(timeout: 1_000)
    end
    expect(consumer).to be_closed
    ended_with(asker, Sluice::Errors::ConsumerClosedError)
  end

  it "a Consumer's close returns within its timeout while another thread waits for a commit's answer" do
    consumer = build_consumer("bootstrap.servers": silent_brokers) { |config| config.max_wait_timeout = 15_000 }
    consumer.assign("sluice-spec-silent" => [0])
    committer = blocked("commit") { consumer.commit("sluice-spec-silent" => { 0 => 5 }) }
    expect_within(1.0 + margin, guards: "the close waiting for the commit's whole wait (max_wait_timeout)") do
      consumer.close(timeout: 1_000)
    end
    expect(consumer).to be_closed
    expect(committer.join(margin)).to be_truthy, "the commit did not end as the close began"
    expect(committer.value).to be_a(Sluice::Errors::ConsumerClosedError)
  end
end
