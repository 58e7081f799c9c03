# frozen_string_literal: true

RSpec.describe Sluice::Instrumentation::LoggerListener do
  let(:log) { StringIO.new }
  let(:logger) { Logger.new(log, level: Logger::DEBUG, formatter: ->(severity, _, _, line) { "#{severity} #{line}\n" }) }
  let(:monitor) { Sluice::Monitor.new(logger: Logger.new(nil)) }

  def lines = log.string.lines.map(&:chomp)

  before { monitor.subscribe(described_class.new(logger)) }

  it "subscribes to the WaterDrop-named events it logs" do
    expect(monitor.listening?("message.produced_async")).to be(true)
    expect(monitor.listening?("transaction.finished")).to be(true)
    expect(monitor.listening?("message.acknowledged")).to be(false)
    expect(monitor.listening?("statistics.emitted")).to be(false)
  end

  it "logs one info line per produce (with its time) and the message at debug" do
    monitor.instrument("message.produced_sync", { producer_id: "p1", message: { topic: "t", payload: "x" } }) { :done }
    expect(lines.first).to match(/\AINFO \[p1\] Sync producing of a message to 't' topic took \d+\.\d+ ms\z/)
    expect(lines.last).to eq('DEBUG [p1] {topic: "t", payload: "x"}') # on every Ruby (3.4 changed Hash#inspect)
  end

  it "writes nested hashes, arrays and non-Symbol keys the same way on every Ruby" do
    monitor.instrument("message.produced_sync", producer_id: "p1",
                                                message: { topic: "t", headers: { "k" => ["v", nil] }, key: :sym, partition: 1 })
    expect(lines.last).to eq('DEBUG [p1] {topic: "t", headers: {"k" => ["v", nil]}, key: :sym, partition: 1}')
  end

  it "logs batches, buffers and flushes with their sizes and topics" do
    batch = [{ topic: "a" }, { topic: "b" }, { topic: "a" }]
    monitor.instrument("messages.produced_async", producer_id: "p", messages: batch)
    monitor.instrument("messages.buffered", producer_id: "p", messages: batch)
    monitor.instrument("buffer.flushed_sync", producer_id: "p", messages: batch)
    monitor.instrument("buffer.purged", producer_id: "p")
    expect(lines.grep(/INFO/)).to eq(['INFO [p] Async producing of 3 messages to ["a", "b"] topics',
                                      'INFO [p] Buffering of 3 messages to ["a", "b"] topics',
                                      "INFO [p] Sync flushing of 3 messages from the buffer",
                                      "INFO [p] Successfully purging buffer"])
  end

  it "logs errors at error, purges at warn, lifecycle and transactions at info" do
    monitor.instrument("error.occurred", producer_id: "p", type: "librdkafka.error", error: StandardError.new("boom"))
    monitor.instrument("message.purged", producer_id: "p", topic: "t", error: Sluice::KafkaError.new(Sluice::KafkaError.number_for(:purge_queue)))
    monitor.instrument("transaction.started", producer_id: "p")
    monitor.instrument("transaction.finished", producer_id: "p", time: 12.345)
    monitor.instrument("producer.closing", producer_id: "p")
    monitor.instrument("producer.closed", producer_id: "p")
    expect(lines).to eq(["ERROR [p] Error occurred: boom - librdkafka.error",
                         "WARN [p] Message to 't' topic purged before delivery (purge_queue)",
                         "INFO [p] Starting transaction", "INFO [p] Processing transaction took 12.35 ms",
                         "INFO [p] Closing producer", "INFO [p] Producer closed"])
  end

  it "leaves the messages out with log_messages: false" do
    quiet = Sluice::Monitor.new(logger: Logger.new(nil))
    quiet.subscribe(described_class.new(logger, log_messages: false))
    quiet.instrument("message.buffered", producer_id: "p", message: { topic: "t", payload: "secret" })
    expect(log.string).not_to include("secret")
  end
end
