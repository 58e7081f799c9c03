# frozen_string_literal: true

# Producer#produce_lines: a String's delimited records, a message each, with no Ruby object a message (issue 58);
# reports counted natively (#line_reports). What sluice produce sends plain lines with.
RSpec.describe "Producer#produce_lines (#{TestKafka::MODE} mode)", :kafka do
  before(:all) { @topics = SluiceCommand.create_topics({ lines: 1, refused: 1 }) }
  after(:all) { SluiceCommand.delete_topics(@topics.values) if @topics }

  it "sends every record past a full local queue, names the empty ones, and counts the deliveries" do
    producer = build_producer(kafka: { "queue.buffering.max.messages": 10 }, wait_backoff_on_queue_full: 1)
    records = Array.new(499) { |i| (i + 1) % 100 == 0 ? "" : "r#{i + 1}" }
    data = "#{records.join("--")}--"
    empties = []
    result = producer.produce_lines(@topics[:lines], data, delimiter: "--", line: 1, empties: empties)
    expect(result).to eq([data.bytesize, 500, 495, nil])
    expect(empties).to eq([100, 200, 300, 400])
    expect(producer.flush(10_000)).to be(true)
    expect(producer.line_reports).to eq([495, []]) # a report is counted before its event is destroyed, flush waits for that
    expect(consume(@topics[:lines], 0, 0, 495).map { |m| m[:payload] }).to eq(records.reject(&:empty?))
  end

  it "stops at max messages, and at a record librdkafka refuses, with its offset, number and error" do
    producer = build_producer(kafka: { "message.max.bytes": 1_000 })
    data = "one\ntwo\n#{"x" * 2_000}\nfour"
    expect(producer.produce_lines(@topics[:refused], data, delimiter: "\n", line: 7, max: 1)).to eq([4, 8, 1, nil])
    offset, line, sent, error = producer.produce_lines(@topics[:refused], data, delimiter: "\n", offset: 4, line: 8)
    expect([offset, line, sent]).to eq([8, 9, 1])
    expect(error.code).to eq(:msg_size_too_large)
    expect(producer.produce_lines(@topics[:refused], data, delimiter: "\n", offset: 2_009, line: 10)).to eq([data.bytesize, 11, 1, nil])
    expect(producer.flush(10_000)).to be(true)
    expect(producer.line_reports).to eq([3, []])
  end
end
