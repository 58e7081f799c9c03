# frozen_string_literal: true

RSpec.describe Sluice::KafkaError do
  describe "codes from librdkafka's error table" do
    {
      -184 => :queue_full,
      -192 => :msg_timed_out,
      -195 => :transport,
      -187 => :all_brokers_down,
      -152 => :purge_queue,
      -151 => :purge_inflight,
      -190 => :unknown_partition,
      10 => :msg_size_too_large,
      3 => :unknown_topic_or_part,
      0 => :no_error
    }.each do |number, code|
      it "names #{number} #{code.inspect} and maps it back" do
        expect(described_class.code_for(number)).to eq(code)
        expect(described_class.number_for(code)).to eq(number)
      end
    end

    it "gives every number of the table a distinct code, so codes map back to their number" do
      numbers = Sluice::Native.error_descriptions.map(&:first)
      expect(numbers.size).to be > 100
      expect(numbers.map { |n| described_class.number_for(described_class.code_for(n)) }).to eq(numbers)
    end

    it "names a number outside the table :unknown_<number>" do
      error = described_class.new(123_456)
      expect(error.code).to eq(:unknown_123456)
      expect(error.description).to eq("unknown error 123456")
    end

    it "refuses to look up an unknown code" do
      expect { described_class.number_for(:no_such_error) }.to raise_error(ArgumentError, /unknown librdkafka error code :no_such_error/)
    end
  end

  describe ".new" do
    it "takes librdkafka's description and puts description and code in the message" do
      error = described_class.new(10)
      expect(error).to have_attributes(number: 10, code: :msg_size_too_large, description: "Broker: Message size too large")
      expect(error.message).to eq("Broker: Message size too large (msg_size_too_large)")
      expect(error).to be_a(Sluice::Errors::BaseError)
    end

    it "keeps a description given to it" do
      expect(described_class.new(-195, "connection refused").message).to eq("connection refused (transport)")
    end

    it "is neither fatal nor abortable unless told" do
      error = described_class.new(-184)
      expect(error.fatal?).to be(false)
      expect(error.abortable?).to be(false)
      expect(described_class.new(-184, fatal: true, abortable: true)).to have_attributes(fatal?: true, abortable?: true)
    end

    it "is retryable for transient errors and not for permanent ones" do
      expect(described_class.new(-184).retryable?).to be(true) # queue_full
      expect(described_class.new(-192).retryable?).to be(true) # msg_timed_out
      expect(described_class.new(-195).retryable?).to be(true) # transport
      expect(described_class.new(10).retryable?).to be(false) # msg_size_too_large
      expect(described_class.new(-152).retryable?).to be(false) # purge_queue
    end

    it "names only codes librdkafka knows in its retryable list (a typo would silently make an error permanent)" do
      expect(described_class::RETRYABLE.map { |code| described_class.code_for(described_class.number_for(code)) })
        .to eq(described_class::RETRYABLE)
    end

    it "lets librdkafka's own retriable flag win" do
      expect(described_class.new(-184, retryable: false).retryable?).to be(false)
      expect(described_class.new(10, retryable: true).retryable?).to be(true)
    end
  end

  describe ".from_tuple" do
    it "builds the error from the native [code, message, fatal, retriable, requires_abort] tuple" do
      error = described_class.from_tuple([-145, "not configured", true, false, true])
      expect(error).to have_attributes(code: :not_configured, description: "not configured", fatal?: true,
                                       retryable?: false, abortable?: true)
    end
  end

  describe "as the reason of a ProduceError" do
    it "is exposed with its code, fatal? and retryable?" do
      report = Sluice::Delivery::Report.new("t", 0, -1, described_class.new(-184), :label)
      error = Sluice::Errors::ProduceError.new(report.error, delivery_report: report)
      expect(error).to have_attributes(code: :queue_full, fatal?: false, retryable?: true, delivery_report: report)
      expect(error.message).to eq("delivery failed: Local: Queue full (queue_full)")
    end
  end
end
