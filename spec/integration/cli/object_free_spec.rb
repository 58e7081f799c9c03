# frozen_string_literal: true

require "stringio"
require "sluice/cli"

# Issue 58: sluice produce and tail within 2x kcat's CPU a line. Plain lines go to librdkafka from the input's
# chunks (Producer#produce_lines) and fetched messages come out formatted natively (Consumer#render_batches): no
# DeliveryHandle a line, no Message a fetched message, and the same bytes and words as the Ruby paths. Run in
# process, the GC off while a command runs, to count the objects it made.
RSpec.describe "sluice produce and tail without a Ruby object a message", :kafka, timeout: 120 do
  include SluiceCommand

  # The formats' messages carry 2023 timestamps: under the broker's default retention (7 days) its next retention
  # check (every 5 minutes) deletes them, and a tail after it prints nothing (seen under bin/asan, whose slower
  # example spans a check more often: the Ruby path's tail printed 300 messages, the native one after it none).
  before(:all) { @topics = SluiceCommand.create_topics({ plain: 1, refused: 1, formats: 1 }, config: { "retention.ms" => "-1" }) }
  after(:all) { SluiceCommand.delete_topics(@topics.values) if @topics }

  def topic(name) = @topics.fetch(name)

  # [exit code, stdout, stderr, objects of klass made meanwhile]
  def in_process(klass, *argv, stdin: "")
    streams = Sluice::CLI::IOs.new(StringIO.new(stdin.b), StringIO.new("".b), StringIO.new)
    GC.disable
    before = ObjectSpace.each_object(klass).count
    code = Sluice::CLI.start(argv, streams: streams, env: SluiceCommand.environment)
    [code, streams.stdout.string, streams.stderr.string, ObjectSpace.each_object(klass).count - before]
  ensure
    GC.enable
  end

  it "produces plain lines with no Delivery::Handle a line: empty lines skipped, progress every N, bytes as read" do
    lines = Array.new(2_000) { |i| i % 400 == 7 ? "" : "line #{i}#{"\r" if i == 3} #{"x" * (i % 9)}" }
    code, stdout, stderr, handles = in_process(Sluice::Delivery::Handle, "produce", topic(:plain), "--progress", "500",
                                               stdin: "#{lines.join("\n")}\nlast")
    expect(code).to eq(0), stderr
    expect(stdout).to eq("")
    expect(stderr.lines.grep(/\A.*: (\d+) sent, \d+ delivered, 0 failed/).map { |line| line[/(\d+) sent/, 1].to_i }).to eq([500, 1000, 1500])
    expect(stderr).to include("1996 of 1996 message(s) delivered to #{topic(:plain)}, 0 failed")
    expect(handles).to eq(0)
    expect(consume(topic(:plain), 0, 0, 1996).map { |m| m[:payload] }).to eq(lines.reject(&:empty?) + ["last"])
  end

  it "names a line librdkafka refuses by its number, sends the others, and exits 1" do
    lines = ["first", "y" * 3_000, "third", "z" * 3_000, "fifth"]
    code, _, stderr, handles = in_process(Sluice::Delivery::Handle, "produce", topic(:refused), "-X", "message.max.bytes=2000", "-q",
                                          stdin: lines.join("\n"))
    expect(code).to eq(Sluice::CLI::Command::FAILED)
    expect(stderr.lines.grep(/line \d+:/).map { |line| line[/line (\d+):/, 1].to_i }).to eq([2, 4])
    expect(stderr).to include("delivery failed: Broker: Message size too large").or include("msg_size_too_large")
    expect(stderr).to include("3 of 5 message(s) delivered to #{topic(:refused)}, 2 failed")
    expect(handles).to eq(0)
    expect(consume(topic(:refused), 0, 0, 3).map { |m| m[:payload] }).to eq(%w[first third fifth])
  end

  it "tails each format the consumer can render with the Ruby path's bytes, and no Message a message" do
    producer = Sluice::Producer.new { |config| config.kafka = { "bootstrap.servers": TestKafka::BROKERS } }
    messages = Array.new(300) do |i|
      { topic: topic(:formats), partition: 0, payload: (i % 50 == 1 ? nil : "value #{i} \xFF".b), key: (i.even? ? "key #{i}" : nil),
        timestamp: 1_700_000_000_000 + i }
    end
    producer.produce_many_sync(messages)
    producer.close
    formats = [[], ["-K", "="], ["-Z", "-K", "\\t"], ["-D", "|"], ["-Z", "-f", "%t %p %o %T %k=%s %S %K %R%%\\n"]]
    formats.each do |format|
      argv = ["tail", topic(:formats), "-o", "beginning", "-e", "-q", *format]
      _, expected = in_process(Sluice::Message, *argv, "-u") # one message at a time: the Ruby path
      code, printed, stderr, built = in_process(Sluice::Message, *argv)
      expect(code).to eq(0), stderr
      expect(printed).to eq(expected), "tail #{format.join(" ")}"
      expect(built).to be < 30, "tail #{format.join(" ")}: #{built} Message objects for 300 messages"
    end
  end
end
