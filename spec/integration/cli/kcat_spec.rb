# frozen_string_literal: true

require "open3"
require "pty"
require "tempfile"

# The command lines kcat users type (issue 42): kcat's modes and flags, its
# format strings and delimiters, against the broker.
RSpec.describe "sluice with kcat's command lines", :kafka, timeout: 120 do
  include SluiceCommand

  before(:all) { @topics = SluiceCommand.create_topics({ shape: 2, delimited: 1, nulls: 1, tee: 1, file: 1 }) }
  after(:all) { SluiceCommand.delete_topics(@topics.values) if @topics }

  def topic(name) = @topics.fetch(name)

  def ok(result)
    expect(result.code).to eq(0), result.stderr
    result
  end

  it "takes kcat's -P, -C, -L and -Q with -t, common flags before the command, and prints -f format strings" do
    brokers = TestKafka::BROKERS
    ok(sluice("-b", brokers, "-t", topic(:shape), "-P", "-p", "1", "-k", "fixed", "-H", "trace=abc", "-K", ":", stdin: "a:1\n2\n"))
    format = 'Topic %t [%p] at offset %o: key %k (%K): %s (%S) %h\n'
    consumed = ok(sluice("-b", brokers, "-C", "-t", topic(:shape), "-o", "beginning", "-e", "-f", format))
    expect(consumed.stdout).to eq("Topic #{topic(:shape)} [1] at offset 0: key a (1): 1 (1) trace=abc\n" \
                                  "Topic #{topic(:shape)} [1] at offset 1: key fixed (5): 2 (1) trace=abc\n")

    expect(ok(sluice("-b", brokers, "-L", "-t", topic(:shape))).stdout).to start_with("topic #{topic(:shape)}: 2 partition(s)\n")
    expect(ok(sluice("-b", brokers, "topics")).stdout.lines).to include("#{topic(:shape)}\n")
    expect(ok(sluice("-Q", "-t", "#{topic(:shape)}:1:0", "-t", "#{topic(:shape)}:0:0")).stdout)
      .to eq("#{topic(:shape)} [0] offset -1\n#{topic(:shape)} [1] offset 0\n")
    expect(ok(sluice("-b", brokers, "-G", "kcat-shape-#{SecureRandom.hex(4)}", topic(:shape), "-o", "beginning", "-c", "2")).stdout).to eq("1\n2\n")
  end

  it "splits input on -D and -K with kcat's escapes, and prints with them" do
    ok(sluice("produce", topic(:delimited), "-D", '\x1e', "-K", '\t', stdin: "k1\tv1\x1ek2\tv\n2\x1e"))
    tailed = ok(sluice("tail", topic(:delimited), "-o", "beginning", "-e", "-K", "=", "-D", "|"))
    expect(tailed.stdout).to eq("k1=v1|k2=v\n2|")
  end

  it "prints NULL keys and values as NULL with -Z, as nothing without it" do
    ok(sluice("produce", topic(:nulls), "-K", ":", "-Z", stdin: ":tombstone-key-less\nkey:\n"))
    expect(ok(sluice("tail", topic(:nulls), "-o", "beginning", "-e", "-f", '%k/%s/%K/%S\n')).stdout).to eq("/tombstone-key-less/-1/18\nkey//3/-1\n")
    expect(ok(sluice("tail", topic(:nulls), "-o", "beginning", "-e", "-Z", "-K", "=")).stdout).to eq("NULL=tombstone-key-less\nkey=NULL\n")
  end

  it "echoes what it sends with -T, reads a file with -l, compresses with -z" do
    teed = ok(sluice("-P", "-t", topic(:tee), "-T", "-z", "lz4", stdin: "one\n\ntwo\n"))
    expect(teed.stdout).to eq("one\ntwo\n")
    Tempfile.create("lines") do |file|
      file.write("from\nfile\n")
      file.close
      ok(sluice("-P", "-t", topic(:file), "-l", file.path))
      expect(sluice("-P", "-t", topic(:file), file.path).stderr).to include("add -l")
    end
    expect(ok(sluice("tail", topic(:tee), "-o", "beginning", "-e")).stdout).to eq("one\ntwo\n")
    expect(ok(sluice("tail", topic(:file), "-o", "beginning", "-e", "-u")).stdout).to eq("from\nfile\n")
  end

  # Issue 58: the lines docs/CLI.md's table calls the same, run by kcat and
  # by sluice with the same arguments, print the same bytes. Needs a kcat on
  # PATH (Debian's kcat package); where there is none, it says so and skips.
  describe "beside kcat" do
    kcat = ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).map { |dir| File.join(dir, "kcat") }.find { |path| File.executable?(path) }
    # Produce lines: what kcat's and sluice's messages look like once read back (the format is on the consume side's list).
    read_back = '%k|%K|%s|%S|%h\n'
    produced = {
      plain: [%w[-P -t TOPIC], "a\nb\n\nc"], keyed: [%w[-P -t TOPIC -K :], "k1:v1\nv2\nk3:\n:v4\n"],
      null: [%w[-P -t TOPIC -K : -Z], "k1:v1\nk3:\n:v4\n"], headers: [%w[-P -t TOPIC -k fixed -H a=b -H nullh -H e=], "x\ny\n"],
      delimited: [%w[-P -t TOPIC -D | -K \t], "k\tv|w|"], partition: [%w[-P -t TOPIC -p 0 -c 2], "1\n2\n3\n"],
      modeless: [%w[-t TOPIC -z lz4], "piped\n"], file: [%w[-P -t TOPIC -l FILE], ""]
    }

    before(:all) do
      next unless kcat

      @kcat_topics = SluiceCommand.create_topics({ read: 1, split: 2, **produced.keys.to_h { |name| [name, 1] } })
      @first = (Time.now.to_f * 1000).to_i - 60_000
      producer = Sluice::Producer.new { |config| config.kafka = { "bootstrap.servers": TestKafka::BROKERS } }
      read = [["k1", "v1", { "a" => "b" }], [nil, "v2", nil], ["k3", nil, nil], ["k4", "v\tfour", { "n" => nil, "a" => "c" }],
              ["k5", "\xFF\x00x".b, nil]]
      producer.produce_many_sync(read.each_with_index.map do |(key, payload, headers), i|
        { topic: @kcat_topics[:read], key: key, payload: payload, headers: headers, timestamp: @first + (i * 1000) }.compact
      end)
      producer.produce_many_sync([[0, "p0-a"], [1, "p1-a"], [1, "p1-b"]].map { |p, v| { topic: @kcat_topics[:split], partition: p, payload: v } })
      producer.close
      @lines_file = Tempfile.new("kcat-lines").tap { |file| file.write("from\nfile\n") && file.close }
    end

    after(:all) do
      SluiceCommand.delete_topics(@kcat_topics.values) if @kcat_topics
      @lines_file&.unlink
    end

    before { skip "no kcat on PATH (apt-get install kcat): nothing to compare sluice's output with" unless kcat }

    def placed(args, topic) = args.map { |arg| arg.sub("TOPIC", topic).sub("FILE", @lines_file.path) }

    define_method(:kcat_path) { kcat }

    # Each line's block, eight lines at a time in threads (a run mostly waits
    # on the broker), and what each returned, in order.
    def each_at_once(lines, &)
      lines.each_slice(8).flat_map { |slice| slice.map { |line| Thread.new { yield(*line) } }.map(&:value) }
    end

    # kcat's run with the arguments (and -b first): [stdout, stderr, status].
    def run_kcat(args, stdin: "")
      out, err, status = Open3.capture3(kcat_path, "-b", TestKafka::BROKERS, *args, stdin_data: stdin)
      [out.b, err, status]
    end

    it "prints what kcat prints on the consume lines the table calls the same, and on a terminal without a mode flag" do
      read = @kcat_topics[:read]
      third = @first + 2000
      lines = [%w[-C -o beginning -e], %w[-C -o beginning -e -K :], %w[-C -o beginning -e -Z -K =], %w[-C -o -2 -e],
               %w[-C -o 1 -e -D |], %w[-C -o beginning -c 2], %w[-C -o beginning -e -u -q -E -X fetch.wait.max.ms=10],
               %W[-C -o s@#{third} -e], %w[-C -o beginning -e -K \t -D \x1e],
               ["-C", "-o", "beginning", "-e", "-f", 'Topic %t [%p] at offset %o: key %k (%K): %s (%S) %h %T\n'],
               %w[-C -o beginning -e -f %R%s%%]].map { |args| args + ["-t", read] }
      lines += [%W[-Q -t #{read}:0:#{third}], %W[-C -t #{@kcat_topics[:split]} -p 1 -o beginning -e]]
      outputs = each_at_once(lines.map { |args| [args] }) { |args| [run_kcat(args), sluice("-b", TestKafka::BROKERS, *args)] }
      lines.zip(outputs).each do |args, (from_kcat, from_sluice)|
        expect(from_kcat.last).to be_success, "kcat #{args.join(" ")}: #{from_kcat[1]}"
        expect(ok(from_sluice).stdout.b).to eq(from_kcat.first), "sluice #{args.join(" ")}"
      end
      from_kcat, from_sluice = on_terminal(["-b", TestKafka::BROKERS, "-t", read, "-o", "beginning", "-e"]) # no mode flag
      expect(from_kcat).to include("v1\n")
      expect(from_sluice).to eq(from_kcat)
    end

    it "writes what kcat writes on the produce lines the table calls the same, with or without a mode flag" do
      # kcat first, then sluice, to the same topic: its messages read back are kcat's, then the same again.
      runs = produced.map { |name, (args, stdin)| [@kcat_topics[name], placed(args, @kcat_topics[name]), stdin] }
      read = each_at_once(runs) do |topic, args, stdin|
        [run_kcat(args, stdin: stdin), sluice("-b", TestKafka::BROKERS, *args, stdin: stdin),
         sluice("tail", topic, "-o", "beginning", "-e", "-f", read_back)]
      end
      produced.zip(read).each do |(_, (args, _)), (from_kcat, from_sluice, read_back_result)|
        expect(from_kcat.last).to be_success, "kcat #{args.join(" ")}: #{from_kcat[1]}"
        ok(from_sluice)
        messages = ok(read_back_result).stdout.lines
        expect(messages.size).to be_positive
        expect(messages.last(messages.size / 2)).to eq(messages.first(messages.size / 2)), "sluice #{args.join(" ")}: #{messages.inspect}"
        expect(messages.size).to be_even, "sluice #{args.join(" ")}: #{messages.inspect}"
      end
    end

    # kcat's output and sluice's, with stdin a terminal: a line without a mode then consumes (kcat's rule).
    def on_terminal(args)
      [[kcat_path], SluiceCommand::COMMAND].map do |command|
        PTY.open do |_terminal, tty|
          reader, writer = IO.pipe
          pid = Process.spawn(SluiceCommand.environment, *command, *args, in: tty, out: writer, err: File::NULL)
          writer.close
          out = reader.read
          expect(Process.wait2(pid).last).to be_success, "#{command.last} #{args.join(" ")}"
          out.b
        end
      end
    end
  end
end
