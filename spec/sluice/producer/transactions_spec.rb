# frozen_string_literal: true

# Producer::Transactions without a broker: the rules of a transaction's
# life (what a commit that timed out leaves, what an abortable or retriable
# refusal leads to, what close does to another fiber's transaction, what a
# fence is judged to be) against an in-memory client whose transactional
# calls answer as a script says. The broker's side is in
# spec/integration/producer/transactions_spec.rb and transaction_edges_spec.rb.
RSpec.describe Sluice::Producer::Transactions do
  # Clients::Dummy, whose transactional calls are recorded and answer what
  # #answer set for them (nil, librdkafka's "no error", by default).
  let(:client_class) do
    Class.new(Sluice::Clients::Dummy) do
      # librdkafka's [code, reason] once the client is in a fatal state (nil: sound)
      attr_accessor :fatal_error

      def calls = (@calls ||= [])

      # Every later call of action answers what the block returns.
      def answer(action, &block) = (@answers ||= {})[action] = block

      %i[init_transactions begin_transaction commit_transaction abort_transaction send_offsets_to_transaction].each do |action|
        define_method(action) do |*args|
          calls << [action, *args]
          (@answers ||= {})[action]&.call
        end
      end
    end
  end
  let(:kafka) { { "bootstrap.servers": SpecHelpers::UNREACHABLE, "transactional.id": "spec-txn" } }
  let(:producer) do
    client_class = self.client_class
    kafka = self.kafka
    producer = Sluice::Producer.new do |config|
      config.kafka = kafka
      config.client_class = client_class
      config.logger = Logger.new(nil)
      config.max_wait_timeout = 2_000
      config.wait_backoff_on_transaction_fatal_error = 0
    end
    test_producers << producer
    producer
  end
  let(:client) { producer.client }

  # librdkafka's error tuple: [code, message, fatal, retriable, txn_requires_abort]
  def refusal(name, retriable: false, abortable: false) = [Sluice::KafkaError.number_for(name), name.to_s, false, retriable, abortable]

  def actions = client.calls.map(&:first)

  it "initialises the client's transactions once, then begins and commits each transaction" do
    producer.transaction { producer.produce_async(topic: "t", payload: "a") }
    producer.transaction { producer.produce_async(topic: "t", payload: "b") }

    expect(actions).to eq(%i[init_transactions begin_transaction commit_transaction begin_transaction commit_transaction])
  end

  context "with a commit that times out" do
    # The commit's bound (transaction.timeout.ms) is 1 ms: it gives up after its first slices.
    let(:kafka) { super().merge("transaction.timeout.ms": "1") }

    it "makes it again before the next transaction begins, and says the first one's outcome is unknown" do
      client.answer(:commit_transaction) { refusal(:timed_out) }
      expect { producer.transaction { producer.produce_async(topic: "t", payload: "a") } }
        .to raise_error(Sluice::Errors::TransactionError) { |e| expect([e.code, e.transaction_outcome]).to eq(%i[timed_out unknown]) }

      client.calls.clear
      client.answer(:commit_transaction) { nil } # the broker answers again
      producer.transaction { producer.produce_async(topic: "t", payload: "b") }
      expect(actions).to eq(%i[commit_transaction begin_transaction commit_transaction])
    end

    it "is made again by close, when no transaction came after it" do
      client.answer(:commit_transaction) { refusal(:timed_out) }
      expect { producer.transaction { producer.produce_async(topic: "t", payload: "a") } }.to raise_error(Sluice::Errors::TransactionError)

      client.calls.clear
      client.answer(:commit_transaction) { nil }
      producer.close
      expect(actions).to eq(%i[commit_transaction])
    end
  end

  # Thread.handle_interrupt is no fence against Fiber#raise (Async's
  # Task#stop): the stop lands in the wait for the commit's helper thread.
  context "with an Async task stopped while its commit slice runs", :async do
    let(:kafka) { super().merge("transaction.timeout.ms": "1") }

    it "notes the commit as unfinished, so the next transaction makes it again before it begins" do
      inside = Queue.new
      leave = Queue.new
      client.answer(:commit_transaction) { (inside << true) && leave.pop && refusal(:timed_out) } # the slice runs out
      Async do
        owner = Async { producer.transaction { producer.produce_async(topic: "t", payload: "a") } }
        inside.pop
        owner.stop
        leave << true
      end.wait

      client.calls.clear
      client.answer(:commit_transaction) { nil }
      producer.transaction { producer.produce_async(topic: "t", payload: "b") }
      expect(actions).to eq(%i[commit_transaction begin_transaction commit_transaction])
    end
  end

  it "aborts after a commit refused as abortable, and says the transaction was aborted" do
    client.answer(:commit_transaction) { refusal(:invalid_txn_state, abortable: true) }

    expect { producer.transaction { producer.produce_async(topic: "t", payload: "a") } }
      .to raise_error(Sluice::Errors::TransactionError) { |e| expect(e.transaction_outcome).to eq(:aborted) }
    expect(actions).to eq(%i[init_transactions begin_transaction commit_transaction abort_transaction])
  end

  it "tries a commit refused as retriable at once up to COMMIT_ATTEMPTS times" do
    attempts = described_class::COMMIT_ATTEMPTS
    client.answer(:commit_transaction) { refusal(:coordinator_load_in_progress, retriable: true) }

    expect { producer.transaction { producer.produce_async(topic: "t", payload: "a") } }.to raise_error(Sluice::Errors::TransactionError)
    expect(actions.count(:commit_transaction)).to eq(attempts)
  end

  it "aborts on a raise, joins a nested call, and refuses transaction_mark_as_consumed outside the block" do
    expect do
      producer.transaction do
        producer.transaction { producer.produce_async(topic: "t", payload: "a") } # joined: no second begin
        raise ArgumentError, "the block's own"
      end
    end.to raise_error(ArgumentError) { |e| expect(e.transaction_outcome).to eq(:aborted) }
    expect(actions).to eq(%i[init_transactions begin_transaction abort_transaction])

    expect { producer.transaction_mark_as_consumed(nil, []) }.to raise_error(Sluice::Errors::TransactionRequiredError)
  end

  it "sends, per partition, the offset after its last message" do
    messages = [["in", 0, 4], ["in", 0, 9], ["in", 1, 2]].map { |topic, partition, offset| Sluice::Message.new(topic, partition, offset) }

    consumer = Struct.new(:native).new(:its_native_client)

    producer.transaction { producer.transaction_mark_as_consumed(consumer, messages) }

    sent = client.calls.find { |call| call.first == :send_offsets_to_transaction }
    expect(sent[1, 2]).to eq([:its_native_client, [["in", 0, 10], ["in", 1, 3]]])
  end

  it "has close wait for another thread's transaction, then take it over and abort it" do
    inside = Queue.new
    leave = Queue.new
    owner = Thread.new do
      producer.transaction do
        producer.produce_async(topic: "t", payload: "a")
        inside << true
        leave.pop
      end
    rescue Sluice::Errors::ProducerClosedError => e
      e
    end
    inside.pop

    producer.close(timeout: 100) # waits 100 ms for the owner, then aborts its transaction
    leave << true

    expect(owner.value).to be_a(Sluice::Errors::ProducerClosedError)
    expect(owner.value.message).to include("close aborted it")
    expect(actions).to eq(%i[init_transactions begin_transaction abort_transaction])
  end

  it "refuses close inside the producer's own transaction block" do
    producer.transaction do
      expect { producer.close }.to raise_error(Sluice::Errors::ProducerTransactionalCloseAttemptError)
    end
    expect(actions.last).to eq(:commit_transaction)
  end

  # librdkafka says :fenced both for another producer that took the
  # transactional.id and for the broker's own abort of a transaction open
  # longer than transaction.timeout.ms (a long outage): the second is
  # recovered with a new client, the first stays fatal.
  context "with a commit fenced" do
    let(:transaction_timeout_ms) { 200 }
    let(:kafka) { super().merge("transaction.timeout.ms": transaction_timeout_ms.to_s) }

    def fence_the_commit(fenced)
      fenced.answer(:commit_transaction) do
        fenced.fatal_error = [Sluice::KafkaError.number_for(:fenced), "fenced"]
        [Sluice::KafkaError.number_for(:fenced), "fenced", true, false, false]
      end
    end

    it "takes a transaction older than transaction.timeout.ms to be the broker's timeout, and rebuilds the client" do
      fenced = client
      fence_the_commit(fenced)
      expect do
        producer.transaction do
          producer.produce_async(topic: "t", payload: "a")
          sleep(0.25) # the transaction outlives transaction.timeout.ms: the subject, not a wait for something
        end
      end.to raise_error(Sluice::Errors::TransactionError) { |e| expect([e.code, e.fatal?]).to eq([:fenced, true]) }

      expect(producer.client).not_to equal(fenced)
      producer.transaction { producer.produce_async(topic: "t", payload: "b") }
      expect(producer.client.calls.map(&:first)).to eq(%i[init_transactions begin_transaction commit_transaction])
    end

    context "when the transaction is younger than transaction.timeout.ms" do
      let(:transaction_timeout_ms) { 60_000 } # never outlived here, however slow the machine

      it "takes it to be fenced by another producer: the fenced client stays (fatal for good)" do
        fenced = client
        fence_the_commit(fenced)
        expect { producer.transaction { producer.produce_async(topic: "t", payload: "a") } }
          .to raise_error(Sluice::Errors::TransactionError) { |e| expect(e.code).to eq(:fenced) }

        expect(producer.client).to equal(fenced)
      end
    end
  end
end
