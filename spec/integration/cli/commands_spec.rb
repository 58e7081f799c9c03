# frozen_string_literal: true

require "json"

# The rest of the command line against the broker: topics, describe, create,
# groups and bench; exit codes and errors a script can use; signals.
RSpec.describe "sluice", :kafka, timeout: 120 do
  include SluiceCommand

  before(:all) { @topics = SluiceCommand.create_topics({ signals: 1, bench: 1 }) }
  after(:all) { SluiceCommand.delete_topics(@topics.values) if @topics }

  let(:admin) { Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": TestKafka::BROKERS } } }
  after { admin.close }

  # A Ruby backtrace line, as an uncaught exception prints it.
  let(:backtrace) { /\.rb:\d+:in |^\s+from / }

  describe "create, topics and describe" do
    let(:name) { "sluice-cli-created-#{SecureRandom.hex(4)}" }
    after { admin.delete_topic(name) if admin.topics.include?(name) }

    it "creates a topic with partitions and settings, lists and describes it" do
      created = sluice("create", name, "--partitions", "3", "--config", "cleanup.policy=compact")
      expect(created.code).to eq(0), created.stderr
      expect(admin.describe_topic(name)[:partitions].size).to eq(3)
      expect(admin.describe_configs(topic: name)["cleanup.policy"]).to eq("compact")

      expect(sluice("topics").stdout.lines(chomp: true)).to include(name)
      described = sluice("describe", name)
      expect(described.stdout.lines.first).to eq("topic #{name}: 3 partition(s)\n")
      expect(described.stdout.lines.drop(2).map { |line| line.split.first }).to eq(%w[0 1 2])
      expect(JSON.parse(sluice("describe", name, "-J").stdout)["partitions"].size).to eq(3)
    end

    it "exits 1 when the topic exists, 0 with --if-not-exists" do
      expect(sluice("create", name).code).to eq(0)
      again = sluice("create", name)
      expect(again.code).to eq(1)
      expect(again.stderr).to include("Sluice::Errors::TopicAlreadyExistsError", name)
      expect(sluice("create", name, "--if-not-exists").code).to eq(0)
    end

    it "exits 1 describing a topic that does not exist" do
      result = sluice("describe", name)
      expect(result.code).to eq(1)
      expect(result.stderr).to include("Sluice::Errors::UnknownTopicError", name)
    end
  end

  it "lists the consumer groups" do
    group = "sluice-cli-listed-#{SecureRandom.hex(4)}"
    consumer = Sluice::Consumer.new do |config|
      config.kafka = { "bootstrap.servers": TestKafka::BROKERS, "group.id": group, "enable.auto.commit": false }
      config.logger = Logger.new(nil)
    end
    consumer.assign(@topics[:signals] => { 0 => 0 })
    consumer.commit(@topics[:signals] => { 0 => 0 })
    consumer.close
    expect(sluice("groups").stdout.lines(chomp: true)).to include(group)
  end

  it "bench produces the messages asked for and prints msg/s" do
    before = admin.watermark_offsets(@topics[:bench], 0).last
    result = sluice("bench", @topics[:bench], "--messages", "3000", "--size", "50", "--producers", "2")
    expect(result.code).to eq(0), result.stderr
    expect(result.stdout).to match(%r{\A3000 messages of 50 bytes, 2 producer\(s\): \d+ msg/s, [\d.]+ MB/s, [\d.]+ s\n\z})
    expect(admin.watermark_offsets(@topics[:bench], 0).last - before).to eq(3000)
  end

  describe "exit codes" do
    it "exits 2 with the usage for an unknown command, or none" do
      unknown = sluice("frobnicate")
      expect(unknown.code).to eq(2)
      expect(unknown.stderr).to include('unknown command "frobnicate"', "usage: sluice COMMAND", "tail")
      expect(sluice.code).to eq(2)
    end

    it "exits 2 with the command's usage for an unknown flag or a missing argument" do
      flag = sluice("tail", @topics[:signals], "--frobnicate")
      expect(flag.code).to eq(2)
      expect(flag.stderr).to include("invalid option: --frobnicate", "usage: sluice tail TOPIC")
      expect(sluice("describe").stderr).to include("missing TOPIC")
      expect(sluice("tail", @topics[:signals], "-o", "sideways").code).to eq(2)
    end

    it "exits 2 when no broker is given" do
      result = sluice("topics", env: { "KAFKA_BROKERS" => nil })
      expect(result.code).to eq(2)
      expect(result.stderr).to include("no brokers: give -b HOST:PORT or set KAFKA_BROKERS")
    end

    it "takes -b over KAFKA_BROKERS" do
      result = sluice("topics", "-b", TestKafka::BROKERS, env: { "KAFKA_BROKERS" => SpecHelpers::UNREACHABLE })
      expect(result.code).to eq(0), result.stderr
      expect(result.stdout.lines(chomp: true)).to include(@topics[:signals])
    end

    it "prints help on stdout and exits 0" do
      result = sluice("help", "reset")
      expect(result.code).to eq(0)
      expect(result.stdout).to include("usage: sluice reset GROUP TOPIC", "--dry-run", "-b, --brokers")
    end

    # Issue 42: they waited the whole --timeout and said "timed out".
    { "topics" => [], "groups" => [], "produce" => ["t"], "tail" => ["t"], "lag" => ["g"] }.each do |command, args|
      it "exits 1 at once naming each address and its transport error when no broker answers (#{command})" do
        result = sluice(command, *args, "-b", "#{SpecHelpers::UNREACHABLE},nonexistent.invalid:9092", "-q", stdin: "x\n", timeout: 30)
        expect(result.code).to eq(1)
        expect(result.stderr)
          .to match(/\Asluice #{command}: no broker answered: 127\.0\.0\.1:1 \(Connection refused\), nonexistent\.invalid:9092 \(.+\)\n\z/)
        expect_elapsed(result.seconds, within: 8, guards: "the default --timeout (10 s), waited out before saying so")
      end
    end

    it "exits 1 with a clear error within --timeout when a broker accepts connections but never answers" do
      silent = TCPServer.new("127.0.0.1", 0)
      result = sluice("topics", "-b", "127.0.0.1:#{silent.addr[1]}", "--timeout", "3", "-q", timeout: 30)
      expect(result.code).to eq(1)
      expect(result.stderr).to match(/\Asluice topics: Sluice::Errors::\w+Error: .+\(are the brokers at 127\.0\.0\.1:\d+ reachable\?\)\n\z/)
    ensure
      silent&.close
    end
  end

  describe "tail stopped by a signal" do
    before(:all) do
      producer = Sluice::Producer.new { |config| config.kafka = { "bootstrap.servers": TestKafka::BROKERS } }
      producer.produce_sync(topic: @topics[:signals], payload: "first")
      producer.close
    end

    { "INT" => 130, "TERM" => 143 }.each do |signal, code|
      it "closes its consumer and exits #{code} on SIG#{signal}, without a backtrace" do
        tail = start_sluice("tail", @topics[:signals], "-o", "beginning")
        expect(tail.next_line).to eq("first") # reading: the signal lands in the read loop
        tail.signal(signal)
        status, stderr = tail.finish
        expect(status.exitstatus).to eq(code), "#{status.inspect}\n#{stderr}"
        expect(stderr).not_to match(backtrace)
        expect(stderr).not_to include("Interrupt", "SignalException")
      ensure
        tail&.kill
      end
    end

    # :longjmp: the Interrupt unwinds the metadata call's native frame (Admin#describe_topic), which
    # AddressSanitizer does not see; the sluice it starts then aborts on a stale stack poison (bin/asan).
    it "exits 130 on SIGINT during an admin call (before it reads), without a backtrace", :longjmp do
      silent = TCPServer.new("127.0.0.1", 0) # accepts connections (the kernel does), never answers
      tail = start_sluice("tail", @topics[:signals], "-b", "127.0.0.1:#{silent.addr[1]}", "--timeout", "30")
      # The first connection is the command's probe (BrokerProbe); the second librdkafka's: the command is in its call.
      2.times { Timeout.timeout(30) { silent.accept } }
      tail.signal("INT")
      status, stderr = tail.finish
      expect(status.exitstatus).to eq(130), "#{status.inspect}\n#{stderr}"
      expect(stderr).not_to match(backtrace)
      expect(stderr).not_to include("Interrupt")
    ensure
      tail&.kill
      silent&.close
    end
  end
end
