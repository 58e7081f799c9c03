# frozen_string_literal: true

# Messages are checked in C before librdkafka sees them (nothing is enqueued, no
# handle is registered). The producer points at the real broker address but no
# example here needs the broker to answer.
RSpec.describe "Message rules of Producer#produce_async" do
  let(:producer) { build_producer }
  let(:valid) { { topic: "sluice-spec-1p", payload: "x" } }

  def expect_refused(message, pattern)
    expect { producer.produce_async(message) }.to raise_error(Sluice::Errors::MessageInvalidError, pattern)
    expect(producer.outstanding).to eq(0)
  end

  it "starts with nothing outstanding" do
    expect(producer.outstanding).to eq(0)
  end

  describe "the message itself" do
    ["payload", nil, [[:topic, "t"]], 42].each do |message|
      it "refuses #{message.inspect} (not a Hash), naming its class" do
        expect_refused(message, /message must be a Hash, got #{message.class}/)
      end
    end

    it "refuses unknown keys, naming every one of them" do
      expect_refused(valid.merge(topik: "t", "payload" => "y"), /unknown message keys: \[:topik, "payload"\] \(known: topic, payload,/)
    end

    it "accepts every documented key (the message is enqueued)" do
      unreachable = build_unreachable_producer
      handle = unreachable.produce_async(valid.merge(key: "k", partition: 0, partition_key: "pk", timestamp: Time.now,
                                                     headers: { "h" => %w[1 2], "n" => nil }, label: Object.new))
      expect(unreachable.outstanding).to eq(1)
      unreachable.close!
      expect(handle.wait(raise_response_error: false).error.code).to eq(:purge_queue)
    end
  end

  describe "topic" do
    it "is required" do
      expect_refused({ payload: "x" }, /message needs a :topic/)
    end

    it "is required even when given as nil" do
      expect_refused({ topic: nil, payload: "x" }, /message needs a :topic/)
    end

    it "must be a String or a Symbol (as WaterDrop accepts)" do
      expect_refused({ topic: 42, payload: "x" }, /topic must be a String or Symbol, got Integer/)
      expect_refused({ topic: :"a b", payload: "x" }, /topic "a b" has invalid characters/)
    end

    it "must not be empty" do
      expect_refused({ topic: "", payload: "x" }, /topic must be 1 to 249 characters long, got 0/)
    end

    it "must not be longer than 249 characters" do
      expect_refused({ topic: "t" * 250, payload: "x" }, /topic must be 1 to 249 characters long, got 250/)
    end

    # Kafka's own rule (org.apache.kafka.common.internals.Topic#validate): "." and ".." are not topic names.
    # The broker refuses them (:topic_exception) after the message was accepted and enqueued.
    [".", ".."].each do |topic|
      it "refuses #{topic.inspect}, which Kafka does not allow as a topic name" do
        expect_refused({ topic: topic, payload: "x" }, /topic/)
      end
    end

    ["with space", "slash/ed", "colon:", "nul\0byte", "ümlaut", "star*"].each do |topic|
      it "refuses the invalid characters of #{topic.inspect}" do
        expect_refused({ topic: topic, payload: "x" }, /topic .* has invalid characters \(allowed: ASCII letters, digits, '\.', '_', '-'\)/)
      end
    end
  end

  describe "payload and key" do
    [1, :sym, ["x"], { a: 1 }].each do |payload|
      it "refuses a #{payload.class} payload" do
        expect_refused(valid.merge(payload: payload), /payload must be a String or nil, got #{payload.class}/)
      end
    end

    [1, :sym, ["k"]].each do |key|
      it "refuses a #{key.class} key" do
        expect_refused(valid.merge(key: key), /key must be a String or nil, got #{key.class}/)
      end
    end

    it "refuses a non-String partition_key" do
      expect_refused(valid.merge(partition_key: 5), /partition_key must be a String, got Integer/)
    end
  end

  describe "partition" do
    it "must be an Integer" do
      expect_refused(valid.merge(partition: "0"), /partition must be an Integer, got String/)
    end

    it "must not be a Float" do
      expect_refused(valid.merge(partition: 1.0), /partition must be an Integer, got Float/)
    end

    it "must be -1 or more" do
      expect_refused(valid.merge(partition: -2), /partition must be -1 \(any\) or a partition number, got -2/)
    end

    it "must fit a partition number" do
      expect_refused(valid.merge(partition: 2**31), /partition must be -1 \(any\) or a partition number, got 2147483648/)
    end

    it "refuses a huge partition number as an invalid message, not with a RangeError" do
      expect_refused(valid.merge(partition: 2**64), /partition must be -1 \(any\) or a partition number/)
    end
  end

  describe "timestamp" do
    it "must be a Time or an Integer" do
      expect_refused(valid.merge(timestamp: "2024-01-01"), /timestamp must be a Time or Integer milliseconds, got String/)
    end

    it "must not be a Float" do
      expect_refused(valid.merge(timestamp: 1.7e12), /timestamp must be a Time or Integer milliseconds, got Float/)
    end

    it "must not be negative" do
      expect_refused(valid.merge(timestamp: -1), /timestamp -1 is at or before the epoch/)
    end

    it "refuses a huge Integer as an invalid message, not with a RangeError" do
      expect_refused(valid.merge(timestamp: 2**70), /timestamp/)
    end
  end

  describe "headers" do
    it "must be a Hash" do
      expect_refused(valid.merge(headers: [%w[a 1]]), /headers must be a Hash, got Array/)
    end

    it "must have String names" do
      expect_refused(valid.merge(headers: { a: "1" }), /header names must be Strings, got :a/)
    end

    it "must have String, nil or Array-of-String values" do
      expect_refused(valid.merge(headers: { "a" => 1 }), /header "a" must be a String or an Array of Strings, got Integer/)
    end

    it "must have only Strings in an Array value" do
      expect_refused(valid.merge(headers: { "a" => ["1", 2] }), /header "a" values must be Strings, got 2/)
    end
  end

  describe "produce_many_async" do
    it "enqueues none of the messages when one of them is invalid, whichever its place" do
      messages = Array.new(5) { |i| { topic: "sluice-spec-1p", payload: "m#{i}" } }
      [0, 2, 4].each do |bad|
        batch = messages.dup
        batch[bad] = batch[bad].merge(payload: 1)
        expect { producer.produce_many_async(batch) }.to raise_error(Sluice::Errors::MessageInvalidError, /payload must be a String/)
        expect(producer.outstanding).to eq(0)
      end
    end

    it "enqueues none of the messages when one of them is not a Hash" do
      expect do
        producer.produce_many_async([valid, "oops"])
      end.to raise_error(Sluice::Errors::MessageInvalidError, /message must be a Hash, got String/)
      expect(producer.outstanding).to eq(0)
    end

    it "refuses something that is not an Array" do
      expect { producer.produce_many_async(valid) }.to raise_error(Sluice::Errors::MessageInvalidError, /messages must be an Array, got Hash/)
      expect(producer.outstanding).to eq(0)
    end

    it "refuses a batch with an invalid partition_key message before looking up partitions" do
      batch = [valid.merge(partition_key: "a"), valid.merge(partition_key: :b)]
      expect { producer.produce_many_async(batch) }.to raise_error(Sluice::Errors::MessageInvalidError, /partition_key must be a String/)
      expect(producer.outstanding).to eq(0)
    end
  end

  it "refuses an invalid message that also has a partition_key (validated before the partition lookup)" do
    expect_refused({ topic: "no such topic", payload: "x", partition_key: "k" }, /has invalid characters/)
  end

  it "leaves the message Hash untouched" do
    message = { topic: "sluice-spec-1p", payload: 1, headers: { "a" => "1" } }.freeze
    expect { producer.produce_async(message) }.to raise_error(Sluice::Errors::MessageInvalidError)
    expect(message).to eq(topic: "sluice-spec-1p", payload: 1, headers: { "a" => "1" })
  end
end
