# frozen_string_literal: true

require "socket"

# A producer's close keeps its timeout while another thread's transaction is
# being opened or ended against a coordinator that does not answer (issue 53,
# item 1): every wait of the close takes its one deadline (Shared::ClientLife#deadline).
# Without it, close waited for init_transactions' retries (twice
# transaction.timeout.ms) or for a whole abort call (max_wait_timeout).
RSpec.describe "Producer close: one deadline while another thread's transaction is opened or ended" do
  include PollingScenarios

  close_timeout = 1_000 # ms
  margin = 0.7 # s: one init_transactions slice (0.5 s) at most, past the deadline

  def transactions_of(producer) = producer.instance_variable_get(:@transactions)

  # The owner's transaction reached state (the close must meet it there).
  def wait_for_state(producer, state)
    spin_until(what: "a transaction #{state}") { transactions_of(producer).current&.state == state }
  end

  def close_bounded(producer, close_timeout, margin)
    expect_within(close_timeout / 1000.0 + margin, guards: "close waiting for the other thread's transaction past its timeout") do
      producer.close(timeout: close_timeout)
    end
    expect(producer).to be_closed
  end

  it "while it is being opened: no coordinator answers init_transactions" do
    silent = TCPServer.new("127.0.0.1", 0) # the kernel accepts; nobody answers
    producer = build_producer(kafka: { "bootstrap.servers": "127.0.0.1:#{silent.addr[1]}", "transactional.id": "sluice-spec-close-opening",
                                       "transaction.timeout.ms": 5_000 })
    owner = Thread.new { producer.transaction { :never_ran } }
    owner.report_on_exception = false
    wait_for_state(producer, :opening)
    close_bounded(producer, close_timeout, margin)
    expect { owner.value }.to raise_error(Sluice::Errors::ClientClosedError)
  ensure
    silent&.close
  end

  it "while it is being ended: the coordinator answers no EndTxn", timeout: 30 do
    skip "this librdkafka has no mock cluster" unless Sluice::Native::TestHooks.respond_to?(:mock_bootstraps)

    end_txn = 26 # Kafka's ApiKey
    concurrent_transactions = 51 # retriable: librdkafka sends EndTxn again, and again
    producer = build_producer(kafka: { "test.mock.num.brokers": 1, "transactional.id": "sluice-spec-close-ending" }, max_wait_timeout: 5_000)
    ending = Queue.new
    owner = Thread.new do
      producer.transaction do
        producer.produce_sync(topic: "sluice-spec-close-ending", payload: "p")
        16.times { Sluice::Native::TestHooks.mock_push_request_errors(producer.client, end_txn, [concurrent_transactions] * 64) }
        ending << true
        raise "abort it" # the abort waits for an EndTxn answer that never comes
      end
    end
    owner.report_on_exception = false
    pop_within(ending)
    wait_for_state(producer, :ending)
    close_bounded(producer, close_timeout, margin)
    expect { owner.value }.to raise_error(RuntimeError, "abort it")
  end
end
