# frozen_string_literal: true

# each_message(concurrency: N, ordering: ...) against the real broker, in the
# polling mode of the run: blocks run side by side in the order asked, the
# offset committed never passes a message whose block has not finished, and
# how a read ends (stop, close, a raising block, an interrupt, a revocation)
# leaves nothing skipped. Synchronised on queues: a block waits for what the
# example lets it do, never for time to pass.
RSpec.describe "Consumer#each_message with concurrency", :kafka do
  let(:injected) { Class.new(StandardError) }

  let(:where) { Queue.new } # the thread of every block

  include ParallelReads

  # Reads in a thread of its own, as an application's reader thread would.
  def read_concurrently(&)
    @reader_thread = Thread.new do
      Thread.current.report_on_exception = false # its error is raised by #value below
      yield
    end
    @reader_thread.join(30) or raise "each_message did not return"
    @reader_thread.value
  end

  def wait_pop(queue, seconds = 20) = pop_within(queue, seconds)

  def record_where = where << Thread.current

  # Every block ran on the read's worker threads.
  def expect_blocks_off_reader(at_least:)
    threads = Array.new(where.size) { where.pop }.uniq
    expect(threads.size).to be >= at_least
    expect(threads.map(&:name)).to all(match(/\Asluice\.consumer-worker/))
  end

  include_examples "concurrent reads on any kind of worker"

  describe "ordering" do
    it ":partition waits for a partition's slow block, while another partition goes on" do
      log = run_keys(:partition, { 0 => %w[slow a], 1 => %w[b c] }, others: 2)
      slow = log.find { |event, partition, key| event == :start && key == "slow" && partition.zero? }[1..]
      after_slow = log.find { |event, _, key| event == :start && key == "a" }[1..]
      expect(started_before_end(log, slow, after_slow)).to be(false)
      other_partition = log.select { |event, partition| event == :end && partition == 1 }
      expect(other_partition.size).to eq(2)
      expect(log.index(other_partition.last)).to be < log.index([:end, *slow])
    end

    # librdkafka hands over a fetch of one partition at a time: without a
    # share of the bound per partition (PartitionShares), the bound filled
    # with partition 0's messages behind its held block, and partitions 1
    # and 2 waited until it finished.
    it ":partition gives each partition a share of the bound: other partitions start behind a full one" do
      first = produce(Array.new(20) { |i| "p0-#{i}" }, partition: 0)
      starts = (1..2).to_h { |p| [p, produce(["p#{p}-before"], partition: p) + 1] }
      consumer = reader(0 => first, **starts)
      started = Queue.new
      release = Queue.new
      reading = Thread.new do
        consumer.each_message(concurrency: 4, ordering: :partition, max_buffered: 4) do |message|
          started << [message.partition, message.offset]
          release.pop if message.partition.zero? && message.offset == first
        end
      end
      expect(pop_within(started, 20)).to eq([0, first])
      starts.each_key { |p| produce(["p#{p}-0"], partition: p) }
      expect(Array.new(2) { pop_within(started, 20) }.sort).to eq(starts.sort)
      release << true
      seen = [[0, first], *starts]
      seen << pop_within(started, 20) until seen.count { |p, _| p.zero? } == 20
      consumer.stop
      reading.join(30) or raise "each_message did not return"
      # Partition 0's messages taken back were read again, in order: none skipped, none twice.
      expect(seen.select { |p, _| p.zero? }.map(&:last)).to eq((first...(first + 20)).to_a)
    end

    it ":none starts a key's next message while the one before still runs" do
      log = run_keys(:none, { 0 => %w[slow slow a] }, others: 1)
      slow_first, slow_second = log.select { |event, _, key| event == :start && key == "slow" }.map { |entry| entry[1..] }
      expect(started_before_end(log, slow_first, slow_second)).to be(true)
    end
  end

  describe "offsets" do
    it "commits nothing past a block that has not finished, however many after it finished" do
      consumer, first = reader_of(10)
      later_done = Queue.new
      finished = 0
      lock = Mutex.new
      consumer.each_message(concurrency: 4, ordering: :none, finish_within: 0) do |message|
        if message.offset == first
          pop_within(later_done, 20) # until the nine after it finished
          consumer.stop
          Thread.stop # still running when the read ends: abandoned
        end
        lock.synchronize { later_done << true if (finished += 1) == 9 }
      end
      consumer.close
      expect(committed_offset).to eq(first) # nothing past the first message: it is not done
      expect(reread(10).first).to eq(first)
    end

    it "commits past every message once all finished, in whatever order" do
      consumer, first = reader_of(10)
      later_done = Queue.new
      finished = 0
      lock = Mutex.new
      consumer.each_message(concurrency: 4, ordering: :none) do |message|
        pop_within(later_done, 20) if message.offset == first
        lock.synchronize do
          finished += 1
          later_done << true if finished == 9
          consumer.stop if finished == 10
        end
      end
      consumer.close
      expect(committed_offset).to eq(first + 10)
    end
  end

  describe "how a read ends" do
    it "#stop from another thread: running blocks finish and are stored, what did not start is read again" do
      consumer, first = reader_of(10)
      running = Queue.new
      go = Queue.new
      thread = Thread.new do
        consumer.each_message(concurrency: 2, ordering: :none, max_buffered: 4) do |message|
          running << message.offset
          go.pop
        end
      end
      2.times { pop_within(running) }
      consumer.stop
      2.times { go << true }
      thread.join(30) or raise "each_message did not return"
      expect(running.size).to eq(0) # nothing started after the stop
      consumer.close
      expect(committed_offset).to eq(first + 2)
    end

    it "close from another thread waits for running blocks, then commits them" do
      consumer, first = reader_of(4)
      running = Queue.new
      go = Queue.new
      thread = Thread.new do
        consumer.each_message(concurrency: 2, ordering: :none, max_buffered: 2) do |message|
          running << message.offset
          go.pop
        end
      end
      2.times { pop_within(running) }
      closer = Thread.new { consumer.close }
      Thread.pass until closer.stop? # close stopped the read and waits for the reader (no block starts now)
      2.times { go << true }
      closer.join(30) or raise "close did not return"
      thread.join(30) or raise "each_message did not return"
      expect(running.size).to eq(0)
      expect(reread(1).first).to eq(first + 2)
    end

    # Timeout fires at its time (the blocks may or may not have started by
    # then: either way nothing may be stored past them); Thread#raise and
    # Thread#kill land once four blocks run.
    %i[timeout raise kill].each do |interrupt|
      it "an interrupt in the reader (#{interrupt}) ends running blocks and stores nothing past them" do
        consumer, first = reader_of(10)
        running = Queue.new
        interrupted = Class.new(StandardError)
        reader_thread = Thread.new do
          read = lambda do
            consumer.each_message(concurrency: 4, ordering: :none) do |message|
              running << message.offset
              Thread.stop unless message.offset == first + 1 # only the second one finishes
            end
          end
          interrupt == :timeout ? Timeout.timeout(2, interrupted) { read.call } : read.call
        rescue interrupted
          nil
        end
        unless interrupt == :timeout
          4.times { pop_within(running) }
          interrupt == :kill ? reader_thread.kill : reader_thread.raise(interrupted)
        end
        reader_thread.join(30) or raise "the reader did not end"
        expect(Thread.list.select(&:alive?).map(&:name)).not_to include(/\Asluice\.consumer-worker/)
        consumer.close
        expect(committed_offset).to eq(first)
        expect(reread(2)).to eq([first, first + 1])
      end
    end
  end

  # Two members of one group: the second one's join revokes some of the
  # first one's partitions (all of them under the classic protocol's eager
  # range assignment, some under KIP-848's incremental one) while a block
  # runs on each: the first message of each of the three partitions is held
  # until the example lets it go.
  describe "a revocation" do
    # Yields the first member's events, the queue that lets the held blocks
    # go, the queue of [partition, offset] of every block either member ran
    # (as they finish), and each partition's first offset.
    def run_revocation(finish_within)
      firsts = (0..2).to_h { |p| [p, produce(Array.new(4) { |i| "p#{p}-#{i}" }, partition: p)] }
      members = [build_consumer, build_consumer]
      members.first.commit(topic => firsts)
      members.first.subscribe(topic)
      events = record_events(members.first.monitor, "consumer.revoke_waiting", "consumer.partitions_revoked")
      arrivals = Queue.new
      held = Queue.new
      release = Queue.new
      held_partitions = Set.new
      lock = Mutex.new
      threads = [Thread.new do
        members.first.each_message(concurrency: 4, ordering: :none, max_buffered: 4, finish_within: finish_within) do |message|
          # Once per partition: its first message, not when it is read again.
          if lock.synchronize { message.offset == firsts[message.partition] && held_partitions.add?(message.partition) }
            held << message
            release.pop
          end
          arrivals << [message.partition, message.offset]
        end
      end]
      3.times { pop_within(held, 20) }
      members.last.subscribe(topic) # joins now: the group rebalances
      threads << Thread.new { members.last.each_message { |message| arrivals << [message.partition, message.offset] } }
      yield events, release, arrivals, firsts
    ensure
      members&.each(&:stop)
      threads&.each { |thread| thread.join(30) or raise "a member did not stop" }
    end

    def revoked_partitions(events) = events.await(20) { |event| event.id == "consumer.partitions_revoked" }[:partitions].fetch(topic)

    # Arrivals until the block accepts what arrived (each next one within 60 s).
    def collect(arrivals)
      seen = []
      seen << pop_within(arrivals, 60) until yield(seen)
      seen
    end

    it "waits for running blocks before answering: their offsets are committed, nobody reads them again" do
      run_revocation(20_000) do |events, release, arrivals, firsts|
        events.await(20) { |event| event.id == "consumer.revoke_waiting" }
        3.times { release << true }
        revoked = revoked_partitions(events)
        expect(revoked).not_to be_empty
        # Committed before the revocation was answered: past each held message.
        expect(revoked.to_h { |p| [p, committed_offset(p)] }).to all(satisfy { |p, offset| offset > firsts[p] })
        seen = collect(arrivals) { |so_far| so_far.uniq.size == 12 }
        expect(seen.size - seen.uniq.size).to eq(0)
      end
    end

    it "with finish_within 0 leaves them: their late finishes store nothing, their messages are read again" do
      run_revocation(0) do |events, release, arrivals, firsts|
        revoked = revoked_partitions(events) # answered while the held blocks run
        expect(revoked).not_to be_empty
        3.times { release << true }
        # Each revoked partition's held message: finished late by the first member, read again by its next owner.
        seen = collect(arrivals) { |so_far| so_far.uniq.size == 12 && revoked.all? { |p| so_far.count([p, firsts[p]]) >= 2 } }
        expect(seen.uniq.size).to eq(12)
      end
    end
  end

  it "refuses settings out of range" do
    consumer = reader(0 => 0)
    expect { consumer.each_message(concurrency: 0) { nil } }.to raise_error(ArgumentError, /concurrency must be a positive Integer/)
    expect { consumer.each_message(concurrency: 2, ordering: :fifo) { nil } }.to raise_error(ArgumentError, /ordering is one of/)
    expect { consumer.each_message(concurrency: 4, max_buffered: 2) { nil } }.to raise_error(ArgumentError, /at least concurrency/)
  end
end
