# frozen_string_literal: true

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
end
