# frozen_string_literal: true

# sluice produce stopped by SIGINT or SIGTERM (issue 42): it settles what it
# sent, says how much was delivered and from which input line a rerun
# resumes, and the topic agrees with what it says, wherever the signal lands.
RSpec.describe "sluice produce interrupted", :kafka, timeout: 180 do
  include SluiceCommand

  before(:all) { @topics = SluiceCommand.create_topics({ int: 3, term: 3, idle: 1, early: 1 }) }
  after(:all) { SluiceCommand.delete_topics(@topics.values) if @topics }

  lines = 200_000
  summary_line = /interrupted by SIG\w+ after input line (\d+): (\d+) of (\d+) message\(s\) delivered to \S+, (\d+) failed, (\d+) not known/
  let(:summary_fields) { Struct.new(:lines, :delivered, :sent, :failed, :unknown, :resume, :again) }

  define_method(:summary) do |stderr|
    counts = stderr.match(summary_line)&.captures
    resume = stderr[/to resume, rerun with the input from line (\d+) \(tail -n \+\1\)/, 1]
    expect(counts && resume).to be_truthy, stderr
    summary_fields.new(*counts.map(&:to_i), resume.to_i, stderr[/(\d+) message\(s\) after it were delivered/, 1].to_i)
  end

  # Every line number in the topic (the values are the line numbers): as
  # many as the partitions' ends add up to.
  def numbers_in(topic)
    ends = admin_ends(topic)
    consumer = reader("read_uncommitted")
    consumer.assign(topic => ends.keys.to_h { |partition| [partition, 0] })
    read_messages(consumer, ends.values.sum, 30).map { |message| Integer(message[:payload]) }
  ensure
    consumer&.close
  end

  def admin_ends(topic)
    admin = Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": TestKafka::BROKERS } }
    admin.describe_topic(topic)[:partitions].to_h { |p| [p[:partition], admin.watermark_offsets(topic, p[:partition]).last] }
  ensure
    admin&.close
  end

  # Feeds LINES numbered lines, signals after a random number of progress
  # lines (while it reads, produces and waits for deliveries), checks the
  # summary against the topic.
  { "INT" => [:int, 130], "TERM" => [:term, 143] }.each do |signal, (name, code)|
    it "on SIG#{signal} at a random point: summary and topic agree, nothing before the resume line is missing" do
      topic = @topics.fetch(name)
      produce = start_sluice("produce", topic, "--progress", "10000")
      writer = Thread.new { (1..lines).each_slice(5_000) { |slice| break unless produce.write("#{slice.join("\n")}\n") } }
      rand(1..8).times { expect(produce.next_error).to include("sent") }
      produce.signal(signal)
      status, stderr = produce.finish
      writer.join
      expect(status.exitstatus).to eq(code), stderr
      got = summary(stderr)
      expect(got.sent).to eq(got.delivered + got.failed + got.unknown)
      expect(got.failed).to eq(0)

      numbers = numbers_in(topic)
      expect(numbers.size).to be_between(got.delivered, got.delivered + got.unknown)
      expect(numbers.uniq.size).to eq(numbers.size)
      expect((1...got.resume).to_a - numbers).to be_empty # everything before the resume line is there
      expect(numbers.count { |n| n >= got.resume }).to be_between(got.again, got.again + got.unknown)
    ensure
      produce&.kill
    end
  end

  it "while waiting for input: everything read is delivered, the rerun starts at the next line" do
    produce = start_sluice("produce", @topics.fetch(:idle), "--progress", "3")
    produce.write("1\n2\n3\n")
    expect(produce.next_error).to include("3 sent")
    produce.signal("INT")
    status, stderr = produce.finish
    expect(status.exitstatus).to eq(130), stderr
    got = summary(stderr)
    expect(got.to_a).to eq([3, 3, 3, 0, 0, 4, 0])
    expect(numbers_in(@topics.fetch(:idle)).sort).to eq([1, 2, 3])
  ensure
    produce&.kill
  end
end
