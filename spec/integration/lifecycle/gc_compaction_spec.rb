# frozen_string_literal: true

# The native client keeps Ruby objects (its in-flight table, the handle class,
# the notifier) and must follow them when GC compaction moves them.
RSpec.describe "Native objects under GC compaction", :kafka do
  it "keeps producers and in-flight handles valid when every object moves" do
    producer = build_producer(kafka: { "linger.ms": 300 }) # reports arrive after the compaction
    handles = Array.new(200) { |i| producer.produce_async(topic: "sluice-spec-1p", payload: "c#{i}", label: "l#{i}") }

    GC.verify_compaction_references(toward: :empty, double_heap: true)

    reports = handles.map(&:wait)
    expect(reports.map(&:error)).to all(be_nil)
    expect(reports.map(&:label)).to eq(Array.new(200) { |i| "l#{i}" })
    expect(consume_reports(reports.first(3)).map { |m| m[:payload] }).to eq(%w[c0 c1 c2])
    expect(producer.produce_sync(topic: "sluice-spec-1p", payload: "after").error).to be_nil
  end
end
