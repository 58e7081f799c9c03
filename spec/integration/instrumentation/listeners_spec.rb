# frozen_string_literal: true

# The bundled listeners on a real producer: LoggerListener's lines, and
# statistics.emitted carrying karafka-core style _d deltas.
RSpec.describe "Listeners (#{TestKafka::MODE} mode)", :kafka do
  it "LoggerListener logs a producer's life, one line per event" do
    log = StringIO.new
    monitor = Sluice::Monitor.new(logger: Logger.new(nil))
    monitor.subscribe(Sluice::Instrumentation::LoggerListener.new(Logger.new(log, level: Logger::INFO), log_messages: false))
    producer = build_producer(monitor: monitor, id: "logged")
    producer.produce_sync(topic: "sluice-spec-1p", payload: "x")
    producer.buffer(topic: "sluice-spec-1p", payload: "y")
    producer.flush_sync
    producer.close
    text = log.string
    ["[logged] Producer connected", "[logged] Sync producing of a message to 'sluice-spec-1p' topic took",
     "[logged] Buffering of a message to 'sluice-spec-1p' topic", "[logged] Sync flushing of 1 messages from the buffer took",
     "[logged] Closing producer", "[logged] Producer closed"].each { |line| expect(text).to include(line) }
    expect(text).not_to include("payload")
  end

  it "statistics.emitted carries _d deltas, growing with what was produced" do
    producer = build_producer(kafka: { "statistics.interval.ms": 100 })
    stats = Queue.new
    producer.monitor.subscribe("statistics.emitted") { |event| stats << event[:statistics] }
    first = pop_within(stats)
    expect(first).to include("txmsgs_d" => 0)
    producer.produce_many_sync(Array.new(50) { { topic: "sluice-spec-1p", payload: "s" } })
    grown = nil
    Timeout.timeout(10) do
      grown = pop_within(stats) until grown && grown["txmsgs_d"].positive?
    end
    expect(grown["txmsgs_d"]).to be <= 50
    expect(grown["tx_d"]).to be_a(Integer)
    broker = grown["brokers"].values.find { |b| b["nodeid"] >= 0 }
    expect(broker).to include("tx_d", "rx_d")
  end

  it "decorates nothing when nobody listens to statistics.emitted" do
    producer = build_producer(kafka: { "statistics.interval.ms": 100 })
    decorator = producer.instance_variable_get(:@life).state.instance_variable_get(:@statistics)
    expect(decorator).to receive(:call).never
    sleep 0.4
    producer.close
  end
end
