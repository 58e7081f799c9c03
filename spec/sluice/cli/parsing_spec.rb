# frozen_string_literal: true

require "stringio"
require "tempfile"
require "sluice/cli"

# The command line's parsing, without a broker: what each flag becomes, and
# the exit code and message of what cannot run.
RSpec.describe Sluice::CLI do
  def run_cli(*argv, env: {}, stdin: "")
    streams = Sluice::CLI::IOs.new(StringIO.new(stdin), StringIO.new, StringIO.new)
    code = Sluice::CLI.start(argv, streams: streams, env: env)
    [code, streams.stdout.string, streams.stderr.string]
  end

  describe ".start" do
    it "exits 2 with the usage on stderr for an unknown command or none" do
      code, out, err = run_cli("nope")
      expect([code, out]).to eq([2, ""])
      expect(err).to include('unknown command "nope"', "usage: sluice COMMAND", *described_class::COMMANDS.keys)
      expect(run_cli.first).to eq(2)
    end

    it "prints the usage, a command's help and the version on stdout with exit 0" do
      expect(run_cli("help")[0..1]).to eq([0, "#{described_class.usage}\n"])
      expect(run_cli("help", "produce")[1]).to include("usage: sluice produce TOPIC", "--json", "-K, --key-delimiter DELIM")
      expect(run_cli("--version")[1]).to eq("sluice #{Sluice::VERSION} (librdkafka #{Sluice.librdkafka_version})\n")
      expect(run_cli("help", "nope").first).to eq(2)
    end

    it "exits 2 with the command's usage for an unknown flag, a missing or an extra argument" do
      code, _, err = run_cli("describe", "--nope")
      expect(code).to eq(2)
      expect(err).to include("invalid option: --nope", "usage: sluice describe TOPIC")
      expect(run_cli("describe")[2]).to include("missing TOPIC")
      expect(run_cli("reset", "g")[2]).to include("missing TOPIC")
      expect(run_cli("describe", "a", "b")[2]).to include('unexpected argument "b"')
      expect(run_cli("lag", "g", "t", "x")[2]).to include('unexpected argument "x"')
    end

    it "exits 2 when no broker is given, before connecting anywhere" do
      code, _, err = run_cli("topics")
      expect(code).to eq(2)
      expect(err).to include("no brokers: give -b HOST:PORT or set KAFKA_BROKERS")
    end

    it "exits 2 for values a flag does not take" do
      [%w[tail t -o sideways], %w[tail t -c 0], %w[tail t -f xml -b x:1], %w[tail t -G g -o 5 -b x:1], %w[tail t -G g -p 1 -b x:1],
       %w[create t --partitions none], %w[produce t -K : --json -b x:1], %w[produce t -H novalue], %w[produce t -p -1],
       %w[reset g t --to yesterday], %w[reset g t -b x:1], %w[bench t --messages 0], %w[topics -X nonsense], %w[topics --timeout -1]].each do |argv|
        expect(run_cli(*argv).first).to eq(2), "sluice #{argv.join(" ")}"
      end
    end

    # Issue 42: these ended in a backtrace (RangeError, FloatDomainError, optparse's ArgumentError) and exit 1.
    it "exits 2 with one line, no backtrace, for values out of range, malformed, or not UTF-8" do
      huge = "99999999999999999999"
      [%W[tail t -o #{huge}], %W[tail t -o -#{huge}], %W[tail t -c #{huge}], %W[tail t -p #{huge}], %w[tail t -p x], %w[tail t -p -1],
       %w[tail t --timeout 1e308], %w[tail t --timeout nan], %w[tail t --timeout inf], %W[produce t -p #{huge}], %w[produce t -p 1.5],
       %W[bench t --messages #{huge}], %W[bench t --size #{huge}], %W[create t --partitions #{huge}], %w[create t --partitions 0x10],
       ["produce", "t", "-H", "h=\xFF".b], ["tail", "t\xFE".b], ["topics", "-X", "client.id=\xC3".b]].each do |argv|
        code, out, err = run_cli(*argv, "-b", "127.0.0.1:1")
        first = err.lines.first.to_s
        expect([code, out]).to eq([2, ""]), "sluice #{argv.join(" ").inspect}: #{err}"
        expect(first).to start_with("sluice #{argv.first}: ")
        expect(err).not_to match(/\.rb:\d+:in /) # no backtrace
      end
    end
  end

  describe Sluice::CLI::Options do
    def parsed(*argv, env: {})
      options = described_class.new(env)
      OptionParser.new { |parser| options.define(parser) }.parse(argv)
      options
    end

    it "takes the brokers from -b, then -X bootstrap.servers, then KAFKA_BROKERS" do
      env = { "KAFKA_BROKERS" => "env:9092" }
      expect(parsed("-b", "flag:9092", env: env).brokers).to eq("flag:9092")
      expect(parsed("-X", "bootstrap.servers=x:9092", env: env).brokers).to eq("x:9092")
      expect(parsed(env: env).brokers).to eq("env:9092")
      expect { parsed(env: { "KAFKA_BROKERS" => " " }).brokers }.to raise_error(Sluice::CLI::UsageError, /no brokers/)
    end

    it "passes -X pairs to librdkafka, a value with = kept whole, and the timeout in ms" do
      options = parsed("-b", "h:1", "-X", "client.id=ops", "-X", "sasl.password=a=b", "--timeout", "2.5")
      expect(options.kafka).to eq("client.id" => "ops", "sasl.password" => "a=b", "bootstrap.servers" => "h:1")
      expect(options.timeout_ms).to eq(2_500)
    end

    # kcat's -F and KCAT_CONFIG (issue 41): credentials off argv, where every user sees them (/proc/PID/cmdline).
    describe "properties files" do
      def file(text)
        @files ||= []
        (@files << Tempfile.create("sluice-properties")).last.tap do |f|
          f.write(text)
          f.flush
        end.path
      end

      after { @files&.each { |f| File.unlink(f.path) } }

      it "reads -F's KEY=VALUE lines (comments and blank lines skipped, = kept in a value), in order with -X" do
        path = file("# SASL\n  sasl.password=s3=cret  \n\nsasl.username=alice\nclient.id=from-file\n")
        options = parsed("-b", "h:1", "-X", "client.id=before", "-F", path, "-X", "sasl.username=bob")
        expect(options.kafka).to eq("client.id" => "from-file", "sasl.password" => "s3=cret", "sasl.username" => "bob", "bootstrap.servers" => "h:1")
      end

      it "reads the file SLUICE_CONFIG (or else KCAT_CONFIG) names first, under every flag, brokers included" do
        sluice = file("bootstrap.servers=file:9092\nclient.id=sluice-file\n")
        kcat = file("client.id=kcat-file\n")
        expect(parsed(env: { "SLUICE_CONFIG" => sluice, "KCAT_CONFIG" => kcat }).kafka)
          .to eq("client.id" => "sluice-file", "bootstrap.servers" => "file:9092")
        expect(parsed("-X", "client.id=flag", env: { "KCAT_CONFIG" => kcat, "KAFKA_BROKERS" => "env:1" }).kafka)
          .to eq("client.id" => "flag", "bootstrap.servers" => "env:1")
      end

      # create's --config KEY=VALUE (a topic setting) stays its own: the properties file's long flag is another.
      it "leaves create's --config to topic settings" do
        streams = Sluice::CLI::IOs.new(StringIO.new, StringIO.new, StringIO.new)
        argv = ["create", "t", "--config", "cleanup.policy=compact", "--partitions", "0", "-b", "127.0.0.1:1"]
        expect(Sluice::CLI.start(argv, streams: streams, env: {})).to eq(2)
        expect(streams.stderr.string).to start_with("sluice create: --partitions takes a positive integer")
      end

      it "refuses a malformed line by file and line, never echoing what may be a secret, and a file it cannot read" do
        path = file("client.id=x\nsasl.password:s3cret\n")
        expect { parsed("-F", path) }.to raise_error(Sluice::CLI::UsageError) { |e|
          expect(e.message).to include("#{path}:2: expected KEY=VALUE", "sasl.password")
          expect(e.message).not_to include("s3cret")
        }
        expect { parsed("-F", "/nonexistent/sluice.conf") }
          .to raise_error(Sluice::CLI::UsageError, "cannot read the properties file /nonexistent/sluice.conf: No such file or directory")
        expect { parsed(env: { "SLUICE_CONFIG" => "/nonexistent/sluice.conf" }).kafka }.to raise_error(Sluice::CLI::UsageError, /nonexistent/)
      end
    end

    it "logs librdkafka's lines on stderr, none with -q" do
      stderr = StringIO.new
      parsed.logger(stderr).warn("hello")
      parsed("-q").logger(stderr).warn("unseen")
      expect(stderr.string).to eq("sluice: librdkafka: hello\n")
    end
  end

  describe Sluice::CLI::StartOffset do
    it "maps kcat's -o to librdkafka's offsets" do
      expect(%w[beginning end stored 42 -5].map { |text| described_class.parse(text).offsets([0, 1], nil, "t") })
        .to eq([{ 0 => -2, 1 => -2 }, { 0 => -1, 1 => -1 }, { 0 => -1000, 1 => -1000 }, { 0 => 42, 1 => 42 }, { 0 => -2005, 1 => -2005 }])
    end

    it "reads s@TIME as a time, and tells the group's auto.offset.reset where -o has one" do
      expect(described_class.parse("s@1700000000000").value).to eq(Time.at(1_700_000_000))
      expect(%w[beginning end stored 5].map { |text| described_class.parse(text).auto_offset_reset }).to eq(["earliest", "latest", "latest", nil])
      expect { described_class.parse("5x") }.to raise_error(Sluice::CLI::UsageError, /-o takes/)
    end
  end

  describe Sluice::CLI::TimeArgument do
    it "reads ISO 8601 and milliseconds since the epoch" do
      expect(described_class.parse("2024-01-01T00:00:04Z", "--to")).to eq(Time.utc(2024, 1, 1, 0, 0, 4))
      expect(described_class.parse("1704067204500", "--to")).to eq(Time.utc(2024, 1, 1, 0, 0, 4.5r))
      expect { described_class.parse("tuesday", "--to") }.to raise_error(Sluice::CLI::UsageError, /--to takes an ISO 8601 time/)
      expect { described_class.parse("1969-12-31T23:59:59Z", "--to") }.to raise_error(Sluice::CLI::UsageError, /--to takes a time from 1970-01-01/)
      expect { described_class.parse((2**63).to_s, "-o s@") }.to raise_error(Sluice::CLI::UsageError, /-o s@ takes a time from 1970-01-01/)
    end
  end

  describe Sluice::CLI::InputLine do
    it "makes a line the value, or splits the key off at the first -K delimiter" do
      expect(described_class.new(topic: "t").message("a:b\n")).to eq(topic: "t", payload: "a:b")
      keyed = described_class.new(topic: "t", key_delimiter: ":", headers: { "h" => "1" }, partition: 2)
      expect(keyed.message("k:v:w\n")).to eq(topic: "t", key: "k", payload: "v:w", headers: { "h" => "1" }, partition: 2)
      expect(keyed.message("no delimiter")).to eq(topic: "t", payload: "no delimiter", headers: { "h" => "1" }, partition: 2)
    end

    # Issue 42: a CRLF line lost its "\r" (chomp), and an empty line was sent as an empty message.
    it "keeps a line's bytes but the \\n (a \\r stays), skips an empty line, and with -Z sends an empty key or value as NULL, as kcat" do
      plain = described_class.new(topic: "t")
      expect(plain.message("crlf\r\n")).to eq(topic: "t", payload: "crlf\r")
      expect(plain.message("\xFF\x00 \n".b)).to eq(topic: "t", payload: "\xFF\x00 ".b)
      expect([plain.message("\n"), plain.message("")]).to eq([nil, nil])
      expect(plain.message("\r\n")).to eq(topic: "t", payload: "\r")
      null = described_class.new(topic: "t", key_delimiter: ":", null: true)
      expect([null.message(":v\n"), null.message("k:\n"), null.message("k:v")])
        .to eq([{ topic: "t", payload: "v" }, { topic: "t", key: "k", payload: nil }, { topic: "t", key: "k", payload: "v" }])
      expect(described_class.new(topic: "t", key_delimiter: ":").message("k:\n")).to eq(topic: "t", key: "k", payload: "")
    end

    it "reads --json objects: key, value (null: a tombstone), headers merged over -H, partition" do
      json = described_class.new(topic: "t", json: true, headers: { "a" => "1", "b" => "2" })
      expect(json.message(%({"key":"k","value":"v","headers":{"b":"3"},"partition":1})))
        .to eq(topic: "t", key: "k", payload: "v", headers: { "a" => "1", "b" => "3" }, partition: 1)
      expect(json.message(%({"key":"k","value":null}))).to eq(topic: "t", key: "k", payload: nil, headers: { "a" => "1", "b" => "2" })
      expect(json.message(%({"value":12}))[:payload]).to eq("12")
    end

    it "refuses a --json line that is not a message" do
      json = described_class.new(topic: "t", json: true)
      ['{"value":', "[1]", '{"valeu":"x"}', '{"value":{"a":1}}', '{"partition":-1}', '{"headers":{"a":1}}'].each do |line|
        expect { json.message(line) }.to raise_error(ArgumentError), line
      end
    end
  end

  describe Sluice::CLI::MessageFormat do
    let(:message) { Sluice::Message.new("t", 1, 7, "k", "v\xFF".b, 1_700_000_000_123, %w[h x h y]) }

    it "prints the value, or key DELIM value, then -D's delimiter; -Z prints NULL for nil" do
      expect(described_class.new("value").render(message)).to eq("v\xFF\n".b)
      expect(described_class.new("value", key_delimiter: "|",
                                          delimiter: '\x00').render(Sluice::Message.new("t", 0, 0, "k", "v", 0, nil))).to eq("k|v\0")
      tombstone = Sluice::Message.new("t", 0, 0, nil, nil, 0, nil)
      expect(described_class.new("value", key_delimiter: "=").render(tombstone)).to eq("=\n")
      expect(described_class.new("value", key_delimiter: "=", null: true).render(tombstone)).to eq("NULL=NULL\n")
    end

    it "prints JSON with every field, bytes that are not UTF-8 as base64" do
      expect(JSON.parse(described_class.new("json").render(message)))
        .to eq("topic" => "t", "partition" => 1, "offset" => 7, "timestamp" => 1_700_000_000_123, "key" => "k",
               "headers" => { "h" => %w[x y] }, "value_base64" => ["v\xFF".b].pack("m0"))
    end

    it "prints kcat's format strings: every token, escapes, no delimiter added" do
      format = described_class.new('%t|%p|%o|%T|%k|%K|%s|%S|%h|%%|\t\x41\065\n')
      expect(format.render(message)).to eq("t|1|7|1700000000123|k|1|v\xFF|2|h=x,h=y|%|\tA5\n".b)
      expect(described_class.new("%R").render(message)).to eq([2].pack("l>"))
      expect(described_class.new("[%k][%s]%K%S").render(Sluice::Message.new("t", 0, 0, nil, nil, 0, nil))).to eq("[][]-1-1")
    end

    it "refuses a format or a token it does not have" do
      expect { described_class.new("xml") }.to raise_error(Sluice::CLI::UsageError, /value, json or a format string/)
      expect { described_class.new("%q") }.to raise_error(Sluice::CLI::UsageError, /unknown token "%q"/)
      expect { described_class.new("%") }.to raise_error(Sluice::CLI::UsageError, /unknown token "%"/)
      expect { described_class.new('\999') }.to raise_error(Sluice::CLI::UsageError, /not a byte/)
    end
  end

  describe Sluice::CLI::KcatArguments do
    def translate(*argv) = described_class.translate(argv)

    it "maps kcat's modes onto commands, -t onto the topic, and keeps the other flags" do
      expect(translate("-b", "B", "-t", "T", "-P", "-K", ":", "-k", "K", "-H", "a=b", "-Z", "-T", "-c",
                       "5")).to eq(%w[produce T -b B -K : -k K -H a=b -Z -T -c 5])
      expect(translate("-C", "-tT", "-o", "-5", "-e", "-J", "-p", "1", "-u", "-D", "|")).to eq(%w[tail T -o -5 -e -J -p 1 -u -D |])
      expect(translate("-b", "B", "-G", "g", "T", "-o", "beginning")).to eq(%w[tail T -G g -b B -o beginning])
      expect(translate("--timeout", "3", "-C", "-t", "T", "--offset", "beginning", "--json")).to eq(%w[tail T --timeout 3 --offset beginning --json])
      expect(translate("-L")).to eq(%w[topics])
      expect(translate("-L", "-t", "T", "-J")).to eq(%w[describe T -J])
      expect(translate("-Q", "-t", "T:0:1", "-t", "T:1:1")).to eq(%w[offsets T:0:1 T:1:1])
    end

    it "spells kcat's -z, -m, -d, -p -1, -l FILE and -E the sluice way" do
      expect(translate("-P", "-t", "T", "-z", "lz4", "-m", "3", "-d", "broker", "-p", "-1", "-E", "-l", "f"))
        .to eq(%w[produce T --file f -X compression.codec=lz4 --timeout 3 -X debug=broker])
    end

    it "moves a command after common flags to the front, and leaves sluice's own shape alone" do
      expect(translate("-b", "B", "-X", "a=b", "--timeout", "3", "-q", "lag", "g")).to eq(%w[lag -b B -X a=b --timeout 3 -q g])
      expect(translate("tail", "T", "-C")).to eq(%w[tail T -C])
      expect(translate("--nope", "topics")).to eq(%w[topics --nope])
      expect(translate("-b", "B")).to eq(%w[-b B])
    end

    # Issue 58: these were "unknown command -b".
    it "picks kcat's mode for a line without one (consume on a terminal, else produce), and answers -V and -h" do
      expect(described_class.translate(%w[-b B -t T -o beginning], tty: true)).to eq(%w[tail T -b B -o beginning])
      expect(described_class.translate(%w[-b B -t T -z lz4], tty: false)).to eq(%w[produce T -b B -X compression.codec=lz4])
      expect(translate("-b", "B", "-V")).to eq(%w[--version])
      expect(translate("-b", "B", "-C", "-t", "T", "-V")).to eq(%w[--version])
      expect(translate("-b", "B", "-h")).to eq(%w[help])
      expect(run_cli("-b", "B", "-V")[0..1]).to eq([0, "#{Sluice::CLI.version}\n"])
      expect(run_cli("-t", "T", "-q")[2]).not_to include("no -P or -C")
      expect(run_cli("-t", "T")[2]).to start_with("sluice: no -P or -C given: producing stdin's lines (stdin is not a terminal)\n")
    end

    it "refuses what it cannot map, naming it" do
      { %w[-P] => "-P needs a topic", %w[-C -t a -t b] => "one topic at a time", %w[-C -P -t T] => "one of -P, -C, -L, -Q",
        %w[-P -t T f] => "add -l", %w[-C -t T -s avro] => "deserializers", %w[-M 3] => "mock cluster", %w[-C -t T -O] => "-O is not supported",
        %w[-C -t] => "-t takes a value" }.each do |argv, message|
        expect { translate(*argv) }.to raise_error(Sluice::CLI::UsageError, /#{Regexp.escape(message)}/), argv.join(" ")
      end
      expect(run_cli("-P")[0..1]).to eq([2, ""])
    end
  end

  describe Sluice::CLI::InputReader do
    it "splits on the delimiter, keeps it, and gives the last record without one" do
      read, write = IO.pipe
      write.write("a\x1eb\x1e\x1ec".b)
      write.close
      reader = described_class.new(read, "\x1e".b)
      expect([reader.next_records, reader.next_records, reader.next_records]).to eq([["a\x1e", "b\x1e", "\x1e"], ["c"], nil])
    end

    it "hands out what is there without waiting for more, and joins a record split across reads" do
      read, write = IO.pipe
      reader = described_class.new(read, "\n")
      write.write("one\npar")
      expect(reader.next_records).to eq(["one\n"])
      write.write("tial\n")
      write.close
      expect([reader.next_records, reader.next_records]).to eq([["partial\n"], nil])
    end
  end

  describe Sluice::CLI::BrokerProbe do
    it "fails at once naming each address and why when none answers, passes when one does" do
      server = TCPServer.new("127.0.0.1", 0)
      refused = "127.0.0.1:1"
      expect { described_class.new("#{refused},nonexistent.invalid:9092", 5).check! }
        .to raise_error(described_class::Unreachable,
                        /\Ano broker answered: 127\.0\.0\.1:1 \(Connection refused\), nonexistent\.invalid:9092 \(.+\)\z/)
      expect(described_class.new("#{refused}, PLAINTEXT://127.0.0.1:#{server.addr[1]}", 5).check!).to be_nil
    ensure
      server&.close
    end
  end
end
