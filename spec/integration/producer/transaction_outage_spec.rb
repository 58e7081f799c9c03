# frozen_string_literal: true

# A transaction whose broker stops answering (issue 27): every transactional
# call is bounded by max_wait_timeout, so `transaction` ends in a named
# TransactionError instead of waiting until the broker is back (90-127 s
# before), close and SIGTERM work meanwhile, and the producer finishes the
# timed-out commit or abort when the broker is back. A broker of the spec's
# own (OwnBroker), stopped (SIGTERM) or killed (SIGKILL) inside the block.
RSpec.describe "Transactions when the broker stops answering", :kafka, :own_broker, timeout: 120 do
  topic = "sluice-spec-txn-down"
  wait_ms = 2_000

  before do
    OwnBroker.start
    OwnBroker.create_topic(topic)
    TestKafka.warm_transactions(OwnBroker::BROKERS, topic)
  end

  after { OwnBroker.stop }

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  def seconds
    at = now
    yield
    now - at
  end

  # A commit waits the transaction's remaining time (librdkafka's bound):
  # a short transaction.timeout.ms keeps the example short.
  def transactional_producer(max_wait_timeout)
    build_producer(kafka: { "bootstrap.servers": OwnBroker::BROKERS, "transactional.id": "sluice-spec-down-#{SecureRandom.hex(6)}",
                            "transaction.timeout.ms": 6_000, "message.timeout.ms": 6_000 },
                   max_wait_timeout: max_wait_timeout)
  end

  [%w[stopped TERM], %w[killed KILL]].each do |how, signal|
    it "ends the transaction, and then close, within their bounds when the broker is #{how} mid-transaction" do
      producer = transactional_producer(wait_ms)
      producer.transaction { producer.produce_sync(topic: topic, payload: "before") } # initialised, coordinator known
      error = nil
      took = seconds do
        producer.transaction do
          producer.produce_async(topic: topic, payload: "during")
          OwnBroker.signal(signal)
        end
      rescue Sluice::Errors::TransactionError => e
        error = e
      end
      closing = seconds { producer.close(timeout: wait_ms) }
      RSpec.configuration.reporter.message("    broker #{how} (#{TestKafka::MODE}): transaction #{took.round(2)} s " \
                                           "(#{error&.message}), close #{closing.round(2)} s")
      expect(error).to be_a(Sluice::Errors::TransactionError)
      # The commit's wait (the transaction's 6 s at most); an abort after it waits max_wait_timeout, and 5 s at most for
      # the first delivery report.
      expect(took).to be < 6 + 5 + (wait_ms / 1000.0) + 2
      expect(closing).to be < (2 * wait_ms / 1000.0) + 1
      expect(producer).to be_closed
    end
  end

  describe "SIGTERM while the transaction waits on a broker that was killed" do
    include PollingScenarios

    it "closes and exits within the bounds (the trap runs once the bounded call returns)" do
      code = <<~RUBY
        producer = make_producer(kafka: { "bootstrap.servers": #{OwnBroker::BROKERS.inspect}, "transactional.id": "sluice-term-\#{rand(1 << 30)}",
                                          "transaction.timeout.ms": 6_000, "message.timeout.ms": 6_000 }) do |config|
          config.max_wait_timeout = #{wait_ms}
        end
        producer.transaction { producer.produce_sync(topic: #{topic.inspect}, payload: "before") }
        trap("TERM") { producer.close(timeout: #{wait_ms}) }
        begin
          producer.transaction do
            producer.produce_async(topic: #{topic.inspect}, payload: "during")
            $stdout.puts("READY")
            $stdin.read(1) # the broker is killed, then TERM comes
          end
        rescue Sluice::Errors::BaseError => e
          $stdout.puts("ENDED \#{e.class}")
        end
        $stdout.puts("CLOSED \#{producer.closed?}")
      RUBY
      script = "$LOAD_PATH.unshift(#{File.expand_path("../../../lib", __dir__).inspect}); require 'sluice'\n" \
               "BROKERS = #{OwnBroker::BROKERS.inspect}; MODE = #{TestKafka::MODE.inspect}\n" \
               "#{PollingScenarios::PRELUDE}\n#{code}"
      Open3.popen2e(RbConfig.ruby, "-e", script) do |stdin, out, wait|
        expect(out.gets).to eq("READY\n")
        OwnBroker.signal("KILL")
        stdin.write("x") # the block returns: the commit waits on the dead broker
        stdin.flush
        sleep 0.2 # inside the commit's wait (nothing to wait on: the process is not ours to hook)
        signalled = now
        Process.kill("TERM", wait.pid)
        expect(wait.join(20)).not_to be_nil, "the process did not exit within 20 s of SIGTERM"
        exited = now - signalled
        rest = out.read
        RSpec.configuration.reporter.message("    SIGTERM in a stuck transaction (#{TestKafka::MODE}): exited #{exited.round(2)} s after it")
        expect(rest).to include("ENDED Sluice::Errors::TransactionError").or include("ENDED Sluice::Errors::ProducerClosedError")
        expect(rest).to include("CLOSED true")
        expect(exited).to be < 6 + 5 + (wait_ms / 1000.0) + 2
      end
    end
  end
end
