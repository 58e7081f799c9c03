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

  # A commit waits up to transaction.timeout.ms: a short one keeps the
  # examples that wait it out short; the default (60 s) shows close and
  # SIGTERM do not wait it out.
  def transactional_producer(max_wait_timeout, transaction_timeout_ms: 6_000)
    build_producer(kafka: { "bootstrap.servers": OwnBroker::BROKERS, "transactional.id": "sluice-spec-down-#{SecureRandom.hex(6)}",
                            "transaction.timeout.ms": transaction_timeout_ms, "message.timeout.ms": transaction_timeout_ms },
                   max_wait_timeout: max_wait_timeout)
  end

  # One commit call's wait (s): a close takes over between two.
  slice = Sluice::Producer::Transactions::COMMIT_SLICE / 1000.0

  [%w[stopped TERM], %w[killed KILL]].each do |how, signal|
    it "ends the transaction, and then close, within their bounds when the broker is #{how} mid-transaction" do
      producer = transactional_producer(wait_ms)
      producer.transaction { producer.produce_sync(topic: topic, payload: "before") } # initialised, coordinator known
      error = nil
      exiting = nil # the broker's own shutdown, not bounded here: SIGTERM's is graceful, long on a loaded machine
      gone_at = nil
      begin
        producer.transaction do
          producer.produce_async(topic: topic, payload: "during")
          exiting = seconds { OwnBroker.signal(signal) } # returns once the process is gone: the commit meets no broker
          gone_at = now
        end
      rescue Sluice::Errors::TransactionError => e
        error = e
      end
      raise "the transaction ended before the broker was gone: #{error.inspect}" unless gone_at

      took = now - gone_at
      closing = seconds { producer.close(timeout: wait_ms) }
      RSpec.configuration.reporter.message("    broker #{how} (#{TestKafka::MODE}): gone #{exiting.round(2)} s after SIG#{signal}, " \
                                           "then the transaction ended in #{took.round(2)} s (#{error&.message}), close #{closing.round(2)} s")
      expect(error).to be_a(Sluice::Errors::TransactionError)
      # From the broker's exit: the commit's wait (the transaction's 6 s at most); an abort after it waits
      # max_wait_timeout, and 5 s at most for the first delivery report.
      expect_elapsed(took, within: 6 + 5 + (wait_ms / 1000.0) + 2, guards: "the broker's return (90-127 s before issue 27)")
      expect_elapsed(closing, within: (2 * wait_ms / 1000.0) + 1, guards: "a close past its 2 s bound, waiting for the broker's return")
      expect(producer).to be_closed
    end
  end

  it "stops a commit waiting on a killed broker when another thread closes, long before transaction.timeout.ms" do
    producer = transactional_producer(wait_ms, transaction_timeout_ms: 60_000)
    producer.transaction { producer.produce_sync(topic: topic, payload: "before") }
    block_ended = Queue.new
    committer = Thread.new do
      producer.transaction do
        producer.produce_async(topic: topic, payload: "during")
        OwnBroker.signal("KILL")
        block_ended << true
      end
      :committed
    rescue Sluice::Errors::BaseError => e
      e
    end
    block_ended.pop
    sleep 0.2 # inside the commit's wait (the commit has no event to wait on)
    closing = seconds { producer.close(timeout: wait_ms) }
    expect(committer.join(20)).not_to be_nil, "the committing thread still waits 20 s after close returned"
    RSpec.configuration.reporter.message("    close during a stuck commit (#{TestKafka::MODE}): #{closing.round(2)} s " \
                                         "(the commit: #{committer.value.class})")
    expect(committer.value).to be_a(Sluice::Errors::ProducerClosedError)
    expect(committer.value.message).to include("may still commit")
    expect(committer.value.transaction_outcome).to eq(:unknown)
    # One commit slice to stop the commit, then close's own bound (the commit made again, a purge).
    expect_elapsed(closing, within: slice + (2 * wait_ms / 1000.0) + 1, guards: "the stuck commit's transaction.timeout.ms (60 s)")
    expect(producer).to be_closed
  end

  # The committed payloads of the topic's partition 0, from the start to its last stable offset.
  def committed_payloads(topic)
    consumer = Sluice::Consumer.new do |config|
      config.kafka = { "bootstrap.servers": OwnBroker::BROKERS, "group.id": "sluice-spec-down-#{SecureRandom.hex(6)}",
                       "isolation.level": "read_committed", "enable.partition.eof": true }
    end
    at_end = Queue.new
    consumer.monitor.subscribe("consumer.partition_eof") { at_end << true }
    consumer.assign(topic => { 0 => -2 })
    payloads = []
    while at_end.empty?
      message = consumer.poll(500)
      payloads << message.payload if message
    end
    payloads
  ensure
    consumer&.close
  end

  it "lets Timeout end a commit stuck on a stopped broker between two calls, and the next transaction finishes it" do
    producer = transactional_producer(wait_ms, transaction_timeout_ms: 60_000)
    producer.transaction { producer.produce_sync(topic: topic, payload: "before") }
    OwnBroker.signal("TERM")
    error = nil
    took = seconds do
      # Within the commit's first call: nothing noted it unfinished before that call.
      Timeout.timeout(0.5) { producer.transaction { producer.produce_async(topic: topic, payload: "during") } }
    rescue Timeout::Error => e
      error = e
    end
    RSpec.configuration.reporter.message("    Timeout(0.5) around a stuck commit (#{TestKafka::MODE}): raised after #{took.round(2)} s")
    expect(error).to be_a(Timeout::Error)
    expect_elapsed(took, within: 0.5 + slice + 1, guards: "the stuck commit's transaction.timeout.ms (60 s), out of Timeout's reach")
    OwnBroker.start # its data kept: the transaction's coordinator comes back, after loading its log
    # The next transaction makes the unfinished commit first, within max_wait_timeout per try. A try can also
    # fail inside the block: a broker that just came back may take longer than max_wait_timeout to acknowledge
    # the first produce (WaitTimeoutError, once in a loaded bin/test). Such a transaction is aborted, so it is
    # made again, as an application would; one whose outcome is unknown fails the example (it may have committed).
    retry_until = now + 30
    begin
      producer.transaction { producer.produce_sync(topic: topic, payload: "after") }
    rescue Sluice::Errors::BaseError => e
      raise if e.transaction_outcome_unknown? || now > retry_until

      retry
    end
    expect(committed_payloads(topic).last(3)).to eq(%w[before during after]) # after the suite's warm-up transaction
  end

  # Issue 46: the broker's coordinator aborts a transaction open past
  # transaction.timeout.ms and bumps the producer's epoch; the client's next
  # call is fenced (fatal). Before, no transaction committed again (1,130 in
  # a row failed at once); now a fence of a transaction older than the
  # timeout reloads the client, and the next transactions commit.
  it "commits again by itself once a broker killed mid-transaction is back, past transaction.timeout.ms" do
    timeout_ms = 3_000
    producer = transactional_producer(wait_ms, transaction_timeout_ms: timeout_ms)
    reloads = record_events(producer.monitor, "producer.reloaded")
    producer.transaction { producer.produce_sync(topic: topic, payload: "before") }
    id = SecureRandom.hex(4)
    error = nil
    begin
      producer.transaction do
        producer.produce_sync(topic: topic, payload: "doomed-#{id}") # the broker's transaction began
        OwnBroker.signal("KILL")
      end
    rescue Sluice::Errors::BaseError => e
      error = e
    end
    expect(error).to be_a(Sluice::Errors::TransactionError)
    expect(error.transaction_outcome).to eq(:unknown) # a commit was under way: librdkafka goes on with it once the broker is back
    OwnBroker.start # its data kept: the coordinator loads the transaction, expired, and aborts it unless the commit came first
    recovered = now
    failures = commit_five(producer, topic, id, within: 30)
    took = now - recovered
    RSpec.configuration.reporter.message("    broker killed mid-transaction (#{TestKafka::MODE}): 5 transactions committed #{took.round(2)} s " \
                                         "after it was back, #{failures.size} failed first (#{failures.uniq.join(", ")}), " \
                                         "reloads #{reloads.events.map { |event| event[:error].code }}")
    payloads = committed_payloads(topic)
    expect(payloads.grep(/after-#{id}/)).to eq((0...5).map { |i| "after-#{id}-#{i}" })
    expect(payloads.count("doomed-#{id}")).to be <= 1 # the outcome was unknown: committed once, or aborted
  end

  # Five transactions, each of one message, committed within `within` seconds:
  # a failed one is made again, as an application would, when its outcome is
  # :aborted (an :unknown one may have committed: the example fails instead).
  # @return [Array<Symbol>] the codes of the failures on the way
  def commit_five(producer, topic, id, within:)
    started = now
    deadline = started + within
    failures = []
    5.times do |i|
      producer.transaction { producer.produce_sync(topic: topic, payload: "after-#{id}-#{i}") }
    rescue Sluice::Errors::BaseError => e
      raise if e.transaction_outcome_unknown? || now > deadline

      failures << e.code
      retry
    end
    expect_elapsed(now - started, within: within, guards: "a fenced producer whose transactions fail for good (issue 46)")
    failures
  end

  describe "SIGTERM while the transaction waits on a broker that was killed" do
    include PollingScenarios

    it "closes and exits within close's bound, not the commit's (the trap runs between two commit calls)" do
      script = File.expand_path("../../support/scenarios/producer/sigterm_in_transaction.rb", __dir__)
      env = { "KAFKA_BROKERS" => OwnBroker::BROKERS, "SLUICE_POLLING_MODE" => TestKafka::MODE.to_s }
      Open3.popen2e(env, RbConfig.ruby, script, wait_ms.to_s, topic) do |stdin, out, wait|
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
        # transaction.timeout.ms is librdkafka's 60 s: the handler's close stops the commit within a slice.
        expect_elapsed(exited, within: slice + (2 * wait_ms / 1000.0) + 3, guards: "the stuck commit's transaction.timeout.ms (60 s)")
      end
    end
  end
end
