# frozen_string_literal: true

# Transactions at their edges: closing while one is open, leaving a block
# early, a fenced producer, and fatal errors with and without recovery.
RSpec.describe "Transactions at their edges", :kafka, timeout: 180 do
  let(:topic) { "sluice-spec-txn" } # one partition: offsets order everything
  let(:txn_settings) { {} }
  let(:producer) { build_transactional(**txn_settings) }

  def build_transactional(transactional_id: "sluice-spec-edges-#{SecureRandom.hex(6)}", kafka: {}, **settings)
    build_producer(kafka: { "transactional.id": transactional_id }.merge(kafka), **settings)
  end

  def committed_from(offset) = committed_since(topic, offset)

  describe "close while another thread's transaction is open" do
    it "waits for the transaction to commit (within the close timeout), then closes" do
      inside = Queue.new
      go_on = Queue.new
      id = SecureRandom.hex(4)
      first = nil
      owner = Thread.new do
        producer.transaction do
          first = producer.produce_sync(topic: topic, payload: "before-close-#{id}")
          inside << true
          go_on.pop
          producer.produce_sync(topic: topic, payload: "during-close-#{id}") # closing refuses others, not the open transaction
        end
      end
      pop_within(inside)
      closer = Thread.new { producer.close(timeout: 10_000) }
      spin_until { closer.status == "sleep" } # close is waiting for the transaction
      go_on << true

      expect { owner.join }.not_to raise_error
      closer.join
      expect(producer).to be_closed
      expect(committed_from(first.offset).grep(/#{id}/)).to eq(["before-close-#{id}", "during-close-#{id}"])
    end

    it "aborts the transaction once the close timeout passed; the owner learns it from ProducerClosedError" do
      inside = Queue.new
      go_on = Queue.new
      id = SecureRandom.hex(4)
      first = nil
      owner = Thread.new do
        producer.transaction do
          first = producer.produce_sync(topic: topic, payload: "aborted-by-close-#{id}")
          inside << true
          go_on.pop
        end
      end
      owner.report_on_exception = false
      pop_within(inside)

      guards = "giving up before the 500 ms timeout, or waiting for the transaction's owner, held until close returns"
      expect_within(10, at_least: 0.45, guards: guards) { producer.close(timeout: 500) }
      go_on << true

      expect(producer).to be_closed
      expect { owner.join }.to raise_error(Sluice::Errors::ProducerClosedError, /closed while this transaction was open: close aborted it/) { |e|
        expect(e.transaction_outcome).to eq(:aborted) # close aborted it before any commit
      }
      expect(committed_from(first.offset).grep(/#{id}/)).to eq([]) # nothing stayed open or got committed
    end
  end

  it "refuses close inside the producer's own transaction block, and the transaction goes on to commit" do
    id = SecureRandom.hex(4)
    report = producer.transaction do
      expect { producer.close }.to raise_error(Sluice::Errors::ProducerTransactionalCloseAttemptError, /inside its own transaction block/)
      expect { producer.close! }.to raise_error(Sluice::Errors::ProducerTransactionalCloseAttemptError)
      producer.produce_sync(topic: topic, payload: "kept-#{id}")
    end

    expect(producer).not_to be_closed
    expect(committed_from(report.offset).grep(/#{id}/)).to eq(["kept-#{id}"])
  end

  describe "leaving a transaction block early" do
    def leave_with_break(id)
      [1].each do
        producer.transaction do
          producer.produce_sync(topic: topic, payload: "break-#{id}")
          break
        end
      end
    end

    def leave_with_return(id)
      producer.transaction do
        producer.produce_sync(topic: topic, payload: "return-#{id}")
        return :left
      end
    end

    def leave_with_throw(id)
      catch(:out) do
        producer.transaction do
          producer.produce_sync(topic: topic, payload: "throw-#{id}")
          throw :out
        end
      end
    end

    it "aborts and raises EarlyTransactionExitNotAllowedError for break, return and throw; the producer goes on" do
      id = SecureRandom.hex(4)
      start = producer.transaction { producer.produce_sync(topic: topic, payload: "start-#{id}") }
      %i[leave_with_break leave_with_return leave_with_throw].each do |way|
        expect { send(way, id) }.to raise_error(Sluice::Errors::EarlyTransactionExitNotAllowedError, /break, return or throw/) { |e|
          expect(e).to be_transaction_aborted
        }
        expect(producer.transaction?).to be(false)
      end
      producer.transaction { producer.produce_sync(topic: topic, payload: "after-#{id}") }

      expect(committed_from(start.offset).grep(/#{id}/)).to eq(["start-#{id}", "after-#{id}"])
    end
  end

  describe "a fenced producer (another one took its transactional.id)" do
    it "raises the fatal :fenced error from the first call that meets it, and from every later one" do
      transactional_id = "sluice-spec-fenced-#{SecureRandom.hex(4)}"
      fenced = build_transactional(transactional_id: transactional_id)
      fenced.transaction { fenced.produce_sync(topic: topic, payload: "before fencing") }
      successor = build_transactional(transactional_id: transactional_id)
      successor.transaction { successor.produce_sync(topic: topic, payload: "successor") }

      expect { fenced.transaction { fenced.produce_sync(topic: topic, payload: "fenced") } }
        .to raise_error(Sluice::Errors::ProduceError) { |e| expect([e.code, e.fatal?]).to eq([:fenced, true]) }
      # outside a transaction, the produce's own transaction meets it
      expect { fenced.produce_async(topic: topic, payload: "fenced again") }
        .to raise_error(Sluice::Errors::TransactionError) { |e| expect([e.code, e.fatal?]).to eq([:fenced, true]) }
      expect { fenced.transaction { nil } }
        .to raise_error(Sluice::Errors::TransactionError) { |e| expect([e.code, e.fatal?]).to eq([:fenced, true]) }
    end

    # A fence of a transaction younger than transaction.timeout.ms cannot be
    # the broker's timeout: another producer holds the transactional.id, and
    # a reload would fence it back (zombie fencing undone). So it stays fatal,
    # reload_on_transaction_fatal_error (true by default) notwithstanding.
    it "stays down at the defaults when another producer took its transactional.id; the successor keeps committing" do
      transactional_id = "sluice-spec-fenced-#{SecureRandom.hex(4)}"
      fenced = build_transactional(transactional_id: transactional_id)
      expect(fenced.config.reload_on_transaction_fatal_error).to be(true)
      reloads = record_events(fenced.monitor, "producer.reloaded")
      fenced.transaction { fenced.produce_sync(topic: topic, payload: "before fencing") }
      client = fenced.client
      successor = build_transactional(transactional_id: transactional_id)
      successor.transaction { nil } # its init fences `fenced`
      id = SecureRandom.hex(4)

      3.times do
        expect { fenced.transaction { fenced.produce_sync(topic: topic, payload: "fenced-#{id}") } }
          .to raise_error(Sluice::Errors::BaseError) { |e| expect([e.code, e.fatal?, e.transaction_outcome]).to eq([:fenced, true, :aborted]) }
      end
      expect(fenced.client).to equal(client)
      expect(reloads.events).to be_empty
      last = successor.transaction { successor.produce_sync(topic: topic, payload: "successor-#{id}") }
      expect(committed_from(last.offset).grep(/#{id}/)).to eq(["successor-#{id}"])
    end

    it "backs off between failed transactions instead of refusing each at once" do
      transactional_id = "sluice-spec-fenced-#{SecureRandom.hex(4)}"
      fenced = build_transactional(transactional_id: transactional_id)
      fenced.transaction { nil }
      build_transactional(transactional_id: transactional_id).transaction { nil }
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      attempts = 0
      while Process.clock_gettime(Process::CLOCK_MONOTONIC) - started < 1.0 # an application retrying in a loop
        begin
          fenced.transaction { fenced.produce_sync(topic: topic, payload: "fenced") }
        rescue Sluice::Errors::BaseError
          attempts += 1
        end
      end
      # 0.1, 0.2, 0.4 s between them: 4 or 5 attempts in a second, where at once it was thousands.
      expect(attempts).to be_between(2, 6)
    end
  end

  # The broker's coordinator aborts a transaction open past its
  # transaction.timeout.ms and bumps the producer's epoch: the producer's
  # next call is fenced, with no other producer about (what an outage or a
  # broker restart longer than the timeout leaves; the cluster and own-broker
  # specs make those). bin/kafka's broker checks for expired transactions
  # every second.
  describe "a transaction the broker aborted for its transaction.timeout.ms" do
    def expire_transaction(producer, id)
      producer.transaction do
        producer.produce_sync(topic: topic, payload: "expired-#{id}") # the coordinator's transaction began
        sleep 4 # held open past its 1 s timeout and the broker's 1 s check: the precondition, not a wait for anything
      end
    rescue Sluice::Errors::BaseError => e
      e
    end

    it "is taken back at the defaults: the fence is reloaded, and the next transaction commits" do
      producer = build_transactional(kafka: { "transaction.timeout.ms": 1_000, "message.timeout.ms": 1_000 })
      reloads = record_events(producer.monitor, "producer.reloaded")
      id = SecureRandom.hex(4)
      error = expire_transaction(producer, id)
      expect(error).to be_a(Sluice::Errors::TransactionError)
      expect([error.code, error.fatal?, error.transaction_outcome]).to eq([:fenced, true, :unknown])
      expect(reloads.events.map { |event| event[:error].code }).to eq([:fenced])
      later = producer.transaction { producer.produce_sync(topic: topic, payload: "later-#{id}") }
      expect(committed_from(later.offset).grep(/#{id}/)).to eq(["later-#{id}"])
    end

    it "stays down with reload_on_transaction_fatal_error false" do
      producer = build_transactional(kafka: { "transaction.timeout.ms": 1_000, "message.timeout.ms": 1_000 },
                                     reload_on_transaction_fatal_error: false)
      reloads = record_events(producer.monitor, "producer.reloaded")
      expect(expire_transaction(producer, SecureRandom.hex(4))).to have_attributes(code: :fenced, fatal?: true)
      expect { producer.transaction { nil } }.to raise_error(Sluice::Errors::TransactionError) { |e| expect(e.code).to eq(:fenced) }
      expect(reloads.events).to be_empty
    end
  end

  # librdkafka issue 4849: an abort issued while the next transaction's
  # partition registration is retried (the previous transaction's markers
  # are still being written: CONCURRENT_TRANSACTIONS) reaches the coordinator
  # with no transaction open, and fails fatally with INVALID_TXN_STATE.
  # Back-to-back commit/abort pairs with a few ms between produce and abort
  # hit it in about a fifth of the aborts with librdkafka 2.0.2.
  describe "aborting right after produce (librdkafka issue 4849)" do
    def abort_race(wait_timeout_on_transaction_abort:, pairs: 100)
      racer = build_transactional(reload_on_transaction_fatal_error: true, wait_backoff_on_transaction_fatal_error: 0,
                                  max_attempts_on_transaction_fatal_error: pairs + 1,
                                  wait_timeout_on_transaction_abort: wait_timeout_on_transaction_abort)
      reloads = record_events(racer.monitor, "producer.reloaded")
      fatal = 0
      pairs.times do |i|
        racer.transaction { racer.produce_async(topic: topic, payload: "race-commit-#{i}") }
        begin
          racer.transaction do
            racer.produce_async(topic: topic, payload: "race-abort-#{i}")
            sleep((i % 10) * 0.001)
            raise Sluice::AbortTransaction
          end
        rescue Sluice::Errors::TransactionError => e
          raise unless e.fatal? && e.code == :invalid_txn_state

          fatal += 1
        end
      end
      { fatal: fatal, reloads: reloads.events.size }
    end

    it "is fatal in a share of aborts without wait_timeout_on_transaction_abort (each one recovered by a reload), in none with it" do
      without = abort_race(wait_timeout_on_transaction_abort: 0)
      with = abort_race(wait_timeout_on_transaction_abort: 5_000)
      puts "\n    librdkafka #{Sluice::Native.librdkafka_version} issue 4849, 100 aborts each: " \
           "fatal #{without[:fatal]} without wait_timeout_on_transaction_abort, #{with[:fatal]} with it"

      expect(without[:reloads]).to eq(without[:fatal]) # every fatal producer was rebuilt, the next transaction went on
      # The race depends on timing: 16-25 of 100 here, but once 0 in a full run
      # on a loaded machine. Without it in this run, "0 with the wait" proves
      # nothing: say so instead of passing (or failing on librdkafka's timing).
      # A librdkafka that fixed 4849 shows up here as a skip every time.
      skip "issue 4849 did not occur in 100 aborts without the wait: nothing to compare" if without[:fatal].zero?
      expect(with[:fatal]).to eq(0)
    end
  end

  describe "reload after a fatal error" do
    # Fencing is the fatal error a real broker gives a transactional producer
    # on demand; it is non-reloadable by default (the fencing producer is
    # alive), so the spec allows it: the reload's init fences the other one back.
    it "rebuilds a transactional producer after its transaction failed fatally; the next transaction commits" do
      transactional_id = "sluice-spec-reload-#{SecureRandom.hex(4)}"
      reloading = build_transactional(transactional_id: transactional_id, reload_on_transaction_fatal_error: true,
                                      non_reloadable_errors: [], wait_backoff_on_transaction_fatal_error: 10)
      reloads = record_events(reloading.monitor, "producer.reloaded")
      reloading.transaction { reloading.produce_sync(topic: topic, payload: "before") }
      old_client = reloading.client
      build_transactional(transactional_id: transactional_id).transaction { nil } # fences `reloading`
      id = SecureRandom.hex(4)

      expect { reloading.transaction { reloading.produce_sync(topic: topic, payload: "doomed-#{id}") } }
        .to raise_error(Sluice::Errors::ProduceError) { |e| expect([e.code, e.fatal?]).to eq([:fenced, true]) }

      expect(reloads.await.to_h).to include(producer_id: reloading.id, attempt: 1)
      expect(reloads.events.first[:error].code).to eq(:fenced)
      expect(reloading.client).not_to equal(old_client)
      expect(old_client).to be_closed # never two clients alive at once
      later = reloading.transaction { reloading.produce_sync(topic: topic, payload: "later-#{id}") }
      expect(committed_from(later.offset).grep(/#{id}/)).to eq(["later-#{id}"])
    end

    it "rebuilds an idempotent producer and retries the produce that met the fatal error; pending handles resolve with it" do
      idempotent = build_producer(kafka: { "enable.idempotence": true, "linger.ms": 500 },
                                  reload_on_idempotent_fatal_error: true, wait_backoff_on_idempotent_fatal_error: 10)
      reloads = record_events(idempotent.monitor, "producer.reloaded")
      idempotent.produce_sync(topic: "sluice-spec-1p", payload: "before")
      lingering = idempotent.produce_async(topic: "sluice-spec-1p", payload: "lingering")
      old_client = idempotent.client
      break_idempotence(old_client, "spec: idempotence broke")

      report = idempotent.produce_sync(topic: "sluice-spec-1p", payload: "after")
      expect(report.error).to be_nil
      expect(lingering.wait(raise_response_error: false).error).to have_attributes(code: :out_of_order_sequence_number, fatal?: true)
      expect(reloads.events.map { |e| [e[:attempt], e[:error].code] }).to eq([[1, :out_of_order_sequence_number]])
      expect(old_client).to be_closed
    end

    # produce_async reloads inside its hot path (no #reloading block): with and without a listener
    # on message.produced_async, which takes the instrumented path.
    [false, true].each do |listened|
      it "reloads for produce_async too, whose handle then resolves on the new client (listened to: #{listened})" do
        idempotent = build_producer(kafka: { "enable.idempotence": true },
                                    reload_on_idempotent_fatal_error: true, wait_backoff_on_idempotent_fatal_error: 10)
        produced = record_events(idempotent.monitor, "message.produced_async") if listened
        reloads = record_events(idempotent.monitor, "producer.reloaded")
        idempotent.produce_sync(topic: "sluice-spec-1p", payload: "before")
        old_client = idempotent.client
        break_idempotence(old_client, "spec: idempotence broke")

        handle = idempotent.produce_async(topic: "sluice-spec-1p", payload: "after")
        expect(handle.wait.error).to be_nil
        expect(reloads.events.map { |e| e[:attempt] }).to eq([1])
        expect(idempotent.client).not_to equal(old_client)
        expect(produced.events.map { |e| e[:message][:payload] }).to eq(%w[after]) if listened
      end
    end

    it "emits producer.reload first: a listener may change the settings the new client gets; refused ones are reported and left out" do
      idempotent = build_producer(kafka: { "enable.idempotence": true, "client.id": "before" },
                                  reload_on_idempotent_fatal_error: true, wait_backoff_on_idempotent_fatal_error: 10)
      order = []
      refuse = true
      idempotent.monitor.subscribe("producer.reloaded") { order << :reloaded }
      idempotent.monitor.subscribe("producer.reload") do |event|
        order << :reload
        expect(event[:caller]).to equal(idempotent)
        expect(event[:error].code).to eq(:out_of_order_sequence_number)
        event[:kafka][:"client.id"] = "after-#{event[:attempt]}"
        event[:kafka][:"no.such.property"] = 1 if refuse
      end
      errors = record_events(idempotent.monitor, "error.occurred")
      break_client = lambda do
        break_idempotence(idempotent.client, "spec")
      end

      break_client.call
      expect(idempotent.produce_sync(topic: "sluice-spec-1p", payload: "x").error).to be_nil
      expect(order).to eq(%i[reload reloaded])
      expect(errors.events.map { |e| e[:type] }).to include("producer.reload") # librdkafka refused no.such.property
      expect(idempotent.config.kafka_setting("client.id")).to eq("before")

      order.clear
      refuse = false
      break_client.call
      expect(idempotent.produce_sync(topic: "sluice-spec-1p", payload: "y").error).to be_nil
      expect(order).to eq(%i[reload reloaded])
      expect(idempotent.config.kafka_setting("client.id")).to eq("after-1")
    end

    it "gives up after max_attempts_on_idempotent_fatal_error" do
      idempotent = build_producer(kafka: { "enable.idempotence": true },
                                  reload_on_idempotent_fatal_error: true, wait_backoff_on_idempotent_fatal_error: 0,
                                  max_attempts_on_idempotent_fatal_error: 2)
      reloads = record_events(idempotent.monitor, "producer.reloaded")
      # every new client breaks at once: the reloads cannot help
      idempotent.monitor.subscribe("producer.reloaded") do
        break_idempotence(idempotent.client, "again")
      end
      break_idempotence(idempotent.client, "first")

      expect { idempotent.produce_sync(topic: "sluice-spec-1p", payload: "never") }
        .to raise_error(Sluice::Errors::ProduceError) { |e| expect(e.fatal?).to be(true) }
      expect(reloads.events.map { |e| e[:attempt] }).to eq([1, 2])
    end
  end

  def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  def spin_until(timeout: 10)
    deadline = monotonic + timeout
    Thread.pass until yield || monotonic > deadline
    raise "condition not reached within #{timeout}s" unless yield
  end
end
