# frozen_string_literal: true

# The each_message(concurrency:) scenarios whose rules hold whatever runs the
# blocks: worker threads (consumer/parallel_spec.rb) or fibers of the
# caller's scheduler (consumer/parallel_fibers_spec.rb). The including group
# includes ParallelReads and says how its variant reads and waits:
# - read_concurrently { ... }: runs the read (each_message) the variant's way
#   and returns once it returned;
# - wait_pop(queue, seconds = 20): a pop that a block may do, bounded in time;
# - record_where: called first in every block;
# - expect_blocks_off_reader(at_least:): every block ran where the variant
#   says (worker threads; fibers of the calling thread), never on the reader.
RSpec.shared_examples "concurrent reads on any kind of worker" do
  # Its blocks wait for each other: another run's message, read before the
  # stop (the topic is shared), would wait for ever. It is passed over.
  it "runs concurrency blocks at once" do
    tag = rand(1 << 30)
    ours = Array.new(8) { |i| "at-once-#{tag}-#{i}" }
    consumer = reader(0 => produce(ours))
    started = Queue.new
    all_running = Queue.new
    counts = { started: 0, finished: 0 }
    lock = Mutex.new
    read_concurrently do
      consumer.each_message(concurrency: 4, ordering: :none) do |message|
        next unless ours.include?(message.payload)

        record_where
        started << ours.index(message.payload)
        # No block goes on until four run at once.
        lock.synchronize { 8.times { all_running << true } if (counts[:started] += 1) == 4 }
        wait_pop(all_running)
        lock.synchronize { consumer.stop if (counts[:finished] += 1) == 8 }
      end
    end
    expect(Array.new(4) { started.pop }.sort).to eq([0, 1, 2, 3])
    expect(counts[:finished]).to eq(8)
    expect_blocks_off_reader(at_least: 4)
  end

  it ":key runs other keys past a slow one, and each key's messages in order" do
    log = run_keys(:key, { 0 => %w[slow slow a b a b] }, others: 4)
    slow_first = log.find { |event, _, key| event == :start && key == "slow" }[1..]
    slow_second = log.select { |event, _, key| event == :start && key == "slow" }.last[1..]
    expect(started_before_end(log, slow_first, slow_second)).to be(false)
    others_ended = log.select { |event, _, key| event == :end && key != "slow" }
    expect(others_ended.size).to eq(4)
    expect(log.index([:end, *slow_first])).to be > log.index(others_ended.last)
    %w[a b].each do |key|
      starts = log.select { |event, _, k| event == :start && k == key }
      starts.each_cons(2) { |before, after| expect(started_before_end(log, before[1..], after[1..])).to be(false) }
    end
    expect_blocks_off_reader(at_least: 2) # the slow block's and the others'
  end

  it "a raising block: running siblings finish, the error is raised, and the read goes back to the failed message" do
    consumer, first = reader_of(10)
    failing = first + 3
    siblings_started = Queue.new
    raised = Queue.new
    started = Queue.new
    error = nil
    read_concurrently do
      consumer.each_message(concurrency: 4, ordering: :none) do |message|
        record_where
        started << message.offset
        if message.offset == failing
          3.times { wait_pop(siblings_started) }
          raised << true
          raise injected, "boom"
        end
        next unless message.offset > failing

        siblings_started << message.offset
        wait_pop(raised)
        raised << true # for the next sibling
      end
    rescue injected => e
      error = e
    end
    expect(error&.message).to eq("boom")
    expect(Array.new(started.size) { started.pop }.sort).to eq((first..(first + 6)).to_a) # nothing started after the error
    expect_blocks_off_reader(at_least: 4)
    again = []
    read_concurrently do
      consumer.each_message do |message|
        again << message.offset
        consumer.stop if again.size == 2
      end
    end
    expect(again).to eq([failing, failing + 1]) # its siblings' offsets were not stored past it: read again
    consumer.close
  end

  # Inside a block the read cannot end before close returns (it waits for
  # that block): close stops the read and takes effect when it returned.
  it "close inside a block returns at once, and closes once the running blocks finished" do
    consumer, first = reader_of(4)
    sibling = Queue.new
    go = Queue.new
    closed_inside = nil
    read_concurrently do
      consumer.each_message(concurrency: 2, ordering: :none, max_buffered: 2) do |message|
        record_where
        next (sibling << true) && wait_pop(go) unless message.offset == first + 1

        wait_pop(sibling) # the other block runs, and waits for go
        consumer.close(timeout: 60_000)
        closed_inside = consumer.closed?
        go << true
      end
    end
    expect(closed_inside).to be(false) # close returned while the sibling block still ran
    expect(consumer).to be_closed
    expect(committed_offset).to eq(first + 2)
    expect_blocks_off_reader(at_least: 2)
  end
end
