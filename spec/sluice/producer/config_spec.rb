# frozen_string_literal: true

RSpec.describe Sluice::Producer::Config do
  it "is also Sluice::Config, its name before" do
    expect(Sluice::Config).to equal(described_class)
  end

  # Producer.new validates the config before it touches librdkafka, so nothing
  # here needs a broker (an address is given only for the examples that build one).
  def new_producer(&block)
    producer = Sluice::Producer.new do |config|
      config.kafka = { "bootstrap.servers": TestKafka::BROKERS }
      config.polling.mode = TestKafka::MODE
      block&.call(config)
    end
    test_producers << producer
    producer
  end

  def expect_invalid(message, &block)
    expect { new_producer(&block) }.to raise_error(Sluice::Errors::ConfigurationInvalidError, message)
  end

  describe "defaults" do
    subject(:config) { described_class.new }

    it "has an unfrozen, empty kafka Hash, a generated id, :fd polling and 5 s waits" do
      expect(config).to have_attributes(kafka: {}, max_wait_timeout: 5_000, wait_on_queue_full: true, monitor: nil)
      expect(config.id).to match(/\Asluice-\h{12}\z/)
      expect(described_class.new.id).not_to eq(config.id)
      expect(config.polling).to have_attributes(mode: :fd, poller: nil)
      expect(config.polling.fd.to_a).to eq([100, 1_000])
    end

    it "validates as is" do
      expect(config.validate!).to be(config)
    end
  end

  describe "#kafka_pairs and #kafka_setting" do
    it "turns Symbol and String names and any accepted value into librdkafka's Strings" do
      config = described_class.new
      config.kafka = { "linger.ms": 5, "acks" => :all, "enable.idempotence": true, "batch.num.messages" => 1.5 }
      expect(config.kafka_pairs).to eq([%w[linger.ms 5], %w[acks all], %w[enable.idempotence true], %w[batch.num.messages 1.5]])
      expect(config.kafka_setting("linger.ms")).to eq("5")
      expect(config.kafka_setting("acks")).to eq("all")
      expect(config.kafka_setting("transactional.id")).to be_nil
    end
  end

  # Issue 53, item 5: librdkafka reads these spellings, and sluice read them otherwise.
  describe "settings read as librdkafka reads them" do
    def dummy_producer(kafka)
      producer = Sluice::Producer.new do |config|
        config.kafka = kafka
        config.client_class = Sluice::Clients::Dummy
      end
      test_producers << producer
      producer
    end

    it "is idempotent for enable.idempotence on in any spelling" do
      [true, "1", "TRUE", "t"].each { |on| expect(dummy_producer("enable.idempotence": on)).to be_idempotent, on.inspect }
      [false, "0", "False", "F"].each { |off| expect(dummy_producer("enable.idempotence": off)).not_to be_idempotent, off.inspect }
    end

    it "is not transactional with an empty transactional.id (librdkafka takes it as none)" do
      expect(dummy_producer("transactional.id": "")).to have_attributes(transactional?: false, idempotent?: false)
      expect(dummy_producer("transactional.id": "tx")).to have_attributes(transactional?: true, idempotent?: true)
    end

    it "refuses, in an in-memory client too, a value librdkafka refuses" do
      expect { dummy_producer("enable.idempotence": "yes") }
        .to raise_error(Sluice::Errors::ConfigurationInvalidError, /\Akafka property enable.idempotence must be true or false/)
      expect { dummy_producer("transaction.timeout.ms": "ten seconds") }
        .to raise_error(Sluice::Errors::ConfigurationInvalidError, /transaction.timeout.ms must be an integer, got "ten seconds"/)
    end
  end

  describe "validation in Producer.new" do
    it "refuses a kafka setting that is not a Hash" do
      expect_invalid(/kafka must be a Hash of librdkafka properties, got Array/) { |c| c.kafka = [%w[acks all]] }
    end

    it "refuses a nil kafka setting" do
      expect_invalid(/kafka must be a Hash of librdkafka properties, got NilClass/) { |c| c.kafka = nil }
    end

    it "refuses a property name that is neither a Symbol nor a String" do
      expect_invalid(/kafka property names must be Symbols or Strings, got 42/) { |c| c.kafka = c.kafka.merge(42 => "x") }
    end

    [nil, [1], { "a" => 1 }, Object.new].each do |value|
      it "refuses a property value of type #{value.class}" do
        expect_invalid(/kafka property linger\.ms must be a String, Symbol, number or boolean, got #{Regexp.escape(value.inspect)}/) do |c|
          c.kafka = c.kafka.merge("linger.ms": value)
        end
      end
    end

    it "refuses a property value with a NUL byte as a configuration error" do
      expect_invalid(/client\.id/) { |c| c.kafka = c.kafka.merge("client.id": "a\0b") }
    end

    it "refuses a property name with a NUL byte as a configuration error" do
      expect_invalid(/client\.id/) { |c| c.kafka = c.kafka.merge("client.id\0" => "x") }
    end

    [nil, "", :name, 7].each do |id|
      it "refuses id #{id.inspect}" do
        expect_invalid(/id must be a non-empty String/) { |c| c.id = id }
      end
    end

    %i[max_wait_timeout wait_backoff_on_queue_full wait_timeout_on_queue_full].each do |name|
      [0, -1, nil, "100"].each do |value|
        it "refuses #{name} = #{value.inspect}" do
          expect_invalid(/#{name} must be a positive number of milliseconds, got #{Regexp.escape(value.inspect)}/) do |c|
            c.public_send(:"#{name}=", value)
          end
        end
      end
    end

    it "refuses an unknown polling mode, naming the known ones" do
      expect_invalid(/polling\.mode must be one of \[:fd, :thread\], got :fiber/) { |c| c.polling.mode = :fiber }
    end

    it "refuses a polling mode given as a String" do
      expect_invalid(/polling\.mode must be one of \[:fd, :thread\], got "thread"/) { |c| c.polling.mode = "thread" }
    end

    it "refuses a dedicated poller in :thread mode" do
      expect_invalid(/polling\.poller is for :fd mode/) do |c|
        c.polling.mode = :thread
        c.polling.poller = Sluice::Polling::Poller.new
      end
    end

    it "refuses a poller that is not a Sluice::Polling::Poller" do
      expect_invalid(/polling\.poller must be a Sluice::Polling::Poller/) do |c|
        c.polling.mode = :fd
        c.polling.poller = Object.new
      end
    end

    [0, -5, nil].each do |value|
      it "refuses polling.fd.max_time = #{value.inspect}" do
        expect_invalid(/polling\.fd\.max_time must be a positive number of milliseconds, got #{value.inspect}/) do |c|
          c.polling.fd.max_time = value
        end
      end
    end

    it "refuses polling.fd.periodic_poll_interval = 0" do
      expect_invalid(/polling\.fd\.periodic_poll_interval must be a positive number of milliseconds, got 0/) do |c|
        c.polling.fd.periodic_poll_interval = 0
      end
    end

    it "refuses an unknown librdkafka property with librdkafka's own message" do
      expect_invalid(/No such configuration property: "no\.such\.property"/) { |c| c.kafka = c.kafka.merge("no.such.property": 1) }
    end

    it "refuses a librdkafka property value librdkafka does not accept" do
      expect_invalid(/acks/) { |c| c.kafka = c.kafka.merge(acks: "sometimes") }
    end

    it "starts no thread and leaves no file descriptor behind when it refuses a setting" do
      new_producer.close # the first producer may set up process-wide things (the poller's selector)
      threads = live_threads
      fds = open_fds
      3.times { expect_invalid(/No such configuration property/) { |c| c.kafka = c.kafka.merge("no.such.property": 1) } }
      expect(live_threads).to be <= threads # (only other specs' collected garbage may lower the counts)
      expect(open_fds).to be <= fds
    end
  end

  describe "after Producer.new" do
    let(:producer) { new_producer { |c| c.kafka = c.kafka.merge("linger.ms": 1) } }

    it "is frozen, its kafka Hash and polling settings included" do
      config = producer.config
      expect(config).to be_frozen
      expect { config.kafka = {} }.to raise_error(FrozenError)
      expect { config.max_wait_timeout = 1 }.to raise_error(FrozenError)
      expect { config.kafka[:"linger.ms"] = 50 }.to raise_error(FrozenError)
      expect { config.polling.mode = :thread }.to raise_error(FrozenError)
      expect { config.polling.fd.max_time = 1 }.to raise_error(FrozenError)
    end

    it "does not freeze the Hash the caller passed in" do
      settings = { "bootstrap.servers": TestKafka::BROKERS }
      producer = new_producer { |c| c.kafka = settings }
      expect(producer.config.kafka).to eq(settings)
      expect(settings).not_to be_frozen
    end

    it "exposes the id as the producer's id" do
      producer = new_producer { |c| c.id = "orders-producer" }
      expect(producer.id).to eq("orders-producer")
    end
  end
end
