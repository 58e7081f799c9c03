# frozen_string_literal: true

RSpec.describe Sluice::Monitor do
  subject(:monitor) { described_class.new(logger: Logger.new(nil)) }

  it "calls block subscribers with an Event" do
    seen = []
    monitor.subscribe("producer.closed") { |event| seen << [event.id, event[:producer_id]] }
    monitor.instrument("producer.closed", producer_id: "p1")
    expect(seen).to eq([["producer.closed", "p1"]])
  end

  it "calls listener objects by method name and unsubscribes them" do
    listener = Class.new do
      attr_reader :events

      def on_message_acknowledged(event) = (@events ||= []) << event[:offset]
    end.new
    monitor.subscribe(listener)
    monitor.instrument("message.acknowledged", offset: 7)
    monitor.unsubscribe(listener)
    monitor.instrument("message.acknowledged", offset: 8)
    expect(listener.events).to eq([7])
  end

  it "refuses unknown event names" do
    expect { monitor.subscribe("message.acknowleged") {} }.to raise_error(ArgumentError, /unknown event/)
  end

  it "reports a raising listener as error.occurred and still runs the others" do
    errors = []
    later = []
    monitor.subscribe("error.occurred") { |event| errors << event.payload }
    monitor.subscribe("message.acknowledged") { raise "boom" }
    monitor.subscribe("message.acknowledged") { |event| later << event[:offset] }
    monitor.instrument("message.acknowledged", producer_id: "p", offset: 1)
    expect(later).to eq([1])
    expect(errors.first).to include(type: "callbacks.listener.error", event_id: "message.acknowledged", producer_id: "p")
    expect(errors.first[:error].message).to eq("boom")
  end

  it "names the consumer or admin whose event's listener raised" do
    errors = []
    monitor.subscribe("error.occurred") { |event| errors << event.payload }
    monitor.subscribe("consumer.partitions_assigned") { raise "boom" }
    monitor.subscribe("admin.closed") { raise "boom" }
    monitor.instrument("consumer.partitions_assigned", consumer_id: "c", partitions: {})
    monitor.instrument("admin.closed", admin_id: "a")
    expect(errors.map { |error| error.slice(:producer_id, :consumer_id, :admin_id) }).to eq([{ consumer_id: "c" }, { admin_id: "a" }])
  end

  it "tells whether anyone listens" do
    expect(monitor.listening?("statistics.emitted")).to be(false)
    monitor.subscribe("statistics.emitted") {}
    expect(monitor.listening?("statistics.emitted")).to be(true)
  end
end
