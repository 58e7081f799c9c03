# frozen_string_literal: true

# At least once under interrupts (Consumer::Inbox, "The hand-off invariant"):
# whatever interrupts a reader (Timeout, Thread#raise, Thread#kill) and
# wherever it lands, no message is skipped: every one is handed out, here or,
# after a close, to the group's next reader. Each example produces numbered
# messages to one partition, reads them with interrupts, then lets a new
# consumer of the same group read from the committed offset to the end, and
# counts what was never handed out (missing: must be 0) and what was handed
# out more than once (duplicated: allowed, printed).
module InterruptedReads
  TOPIC = "sluice-spec-interrupts"
  Injected = Class.new(StandardError)
  LIB = File.expand_path("../../../lib/sluice", __dir__)
  WORK = 100

  # Counts per message number handed out by a read. A message is recorded
  # in a step no interrupt lands in (Array#<<), as an application's first use
  # of it would be: before anything returns, even a field read (a Struct's
  # reader is a Ruby method in Ruby 3.1, and its return a check).
  class Tally
    def initialize(tag, count)
      @tag = tag
      @count = count
      @received = []
      @counted = 0
      @seen = Hash.new(0)
      @lock = Mutex.new
    end

    def <<(message)
      @received << message
      WORK.times { nil } # an application's work: a few µs an interrupt may land in
    end

    def size = count_received.size
    def full? = size >= @count
    def missing = @count.times.count { |i| !count_received.key?(i) }
    def duplicated = count_received.then { |seen| seen.values.sum - seen.size }

    private

    def count_received
      @lock.synchronize do
        while @counted < @received.size
          tag, number = @received[@counted].payload.split
          @seen[Integer(number)] += 1 if tag == @tag
          @counted += 1
        end
        @seen
      end
    end
  end

  # Each read returns once every message was handed out.
  READS = {
    each_message: lambda do |consumer, tally|
      consumer.each_message do |message|
        tally << message
        consumer.stop if tally.full?
      end
    end,
    each_batch: lambda do |consumer, tally|
      consumer.each_batch(max_items: 5) do |batch|
        batch.each { |message| tally << message }
        consumer.stop if tally.full?
      end
    end,
    # A message poll returned is the application's (README, Guarantees): here
    # nothing lies between poll's return and its first use where Ruby checks
    # for an interrupt (`if message` branches away only when nothing came;
    # `next unless message` would branch, and check, when one came).
    poll: lambda do |consumer, tally|
      until tally.full?
        message = consumer.poll(100)
        tally << message if message
        consumer.store_offset(message) if message
      end
    end,
    # The next poll stores the offset of the message the one before returned
    # (the application came back from it): an interrupt in a poll must leave
    # the message it did not hand out for the next one.
    poll_store: lambda do |consumer, tally|
      until tally.full?
        message = consumer.poll(100, store: true)
        tally << message if message
      end
    end
  }.freeze

  RSpec.describe "Consumer reads interrupted", :kafka do
    let(:group) { "sluice-spec-interrupts-#{rand(1 << 30)}" }

    def build_consumer(group_id = group) = super(group_id: group_id)

    # Produces count messages "<tag> <i>" to partition 0.
    # @return [Array(String, Integer, Integer)] the tag, the first offset and the one after the last
    def produce_numbered(count)
      tag = "run-#{rand(1 << 40)}"
      producer = build_producer
      reports = count.times.each_slice(1000).flat_map do |slice|
        producer.produce_many_sync(slice.map { |i| { topic: TOPIC, partition: 0, payload: "#{tag} #{i}" } })
      end
      [tag, reports.map(&:offset).min, reports.map(&:offset).max + 1]
    end

    # The same group, after the interrupted reader's consumer closed (committing what it stored):
    # reads from the committed offset to the end.
    def read_rest(tally, first, last)
      consumer = build_consumer
      consumer.assign(TOPIC => [0]) # from the group's committed offset
      committed = consumer.committed.dig(TOPIC, 0)
      if committed.negative? # nothing was committed: the interrupted reader finished no message
        consumer.assign(TOPIC => { 0 => first })
        committed = first
      end
      expect(committed).to be_between(first, last)
      until committed >= last
        message = consumer.poll(5_000) or raise "nothing more after offset #{committed} (last #{last})"
        tally << message
        committed = message.offset + 1
      end
    end

    def report(what, tally, interrupts)
      RSpec.configuration.reporter.message(
        "    #{what} (#{TestKafka::MODE}): #{interrupts} interrupts, missing #{tally.missing}, duplicated #{tally.duplicated}"
      )
    end

    # Produces count numbered messages; the block reads them with interrupts
    # (a consumer assigned from the first, a Tally) and returns how many
    # interrupts it made. Then the consumer closes (committing what was
    # stored), the group's next reader reads the rest, and none may be missing.
    def read_interrupted(what, count)
      tag, first, last = produce_numbered(count)
      tally = Tally.new(tag, count)
      consumer = build_consumer
      consumer.assign(TOPIC => { 0 => first })
      interrupts = yield(consumer, tally)
      consumer.close
      read_rest(tally, first, last)
      report(what, tally, interrupts)
      expect(tally.missing).to eq(0)
      interrupts
    end

    # Deterministic: an exception raised into the reader at its k-th step
    # (a line, call or return in sluice's code), k = 1, 2, 3... over more steps
    # than one drain takes to hand out, so it lands once at every step of the
    # hand-off: the drain, a control item, lending, before and after the block,
    # finishing, storing, rewinding. Thread.current.raise is what Thread#raise
    # does to the reader, at a known point; where sluice defers interrupts, so
    # does it. Drains are 3 messages long here, so every few messages are a drain.
    # Steps: about 35 a message in each_message, 16 in each_batch (batches of 5), 65 in poll.
    { each_message: 120, each_batch: 100, poll: 200, poll_store: 200 }.each do |api, steps|
      read = READS.fetch(api)
      it "hands out every message when #{api} is interrupted at every step" do
        stub_const("Sluice::Consumer::Inbox::DRAIN_ITEMS", 3)
        reader = Thread.current
        step = 0
        at = nil
        trace = TracePoint.new(:line, :call, :return, :b_call, :b_return) do |tp|
          next unless at && Thread.current.equal?(reader) && tp.path.start_with?(LIB)

          step += 1
          Thread.current.raise(Injected) if step == at
        end
        interrupts = read_interrupted("#{api}, every step", 3_000) do |consumer, tally|
          (1..steps).count do |k|
            next false if tally.full?

            step = 0
            at = k
            trace.enable { read.call(consumer, tally) }
            false
          rescue Injected
            true
          ensure
            at = nil
          end
        end
        expect(interrupts).to eq(steps) # every step was reached with messages left to read
      end
    end

    READS.each do |api, read|
      it "hands out every message when #{api} runs in Timeout slices" do
        read_interrupted("#{api}, Timeout slices", 30_000) do |consumer, tally|
          interrupts = 0
          while tally.size < 15_000
            begin
              Timeout.timeout(0.0002 + (rand * 0.002)) { read.call(consumer, tally) }
            rescue Timeout::Error
              interrupts += 1
            end
          end
          interrupts
        end
      end

      it "hands out every message when #{api} is hit by a Thread#raise storm" do
        interrupts = read_interrupted("#{api}, Thread#raise storm", 30_000) do |consumer, tally|
          raised = 0
          started = Queue.new
          reading = Thread.new do
            Thread.handle_interrupt(Injected => :never) do # only while reading: the loop itself is not the subject
              started << true
              while tally.size < 15_000
                begin
                  Thread.handle_interrupt(Injected => :immediate) { read.call(consumer, tally) }
                rescue Injected
                  raised += 1
                end
              end
            end
          rescue Injected # one that came as the loop ended
            nil
          end
          started.pop
          # Pacing the storm is what sleep is for here; nothing waits on it.
          while reading.alive?
            reading.raise(Injected)
            sleep(0.0002 + (rand * 0.002))
          end
          reading.join
          raised
        end
        expect(interrupts).to be_positive
      end

      it "hands out every message when #{api}'s reader thread is killed and replaced" do
        read_interrupted("#{api}, reader killed and replaced", 20_000) do |consumer, tally|
          kills = 0
          while tally.size < 10_000
            reader = Thread.new { read.call(consumer, tally) }
            sleep(0.0005 + (rand * 0.005)) # how long the reader lives; nothing waits on it
            reader.kill.join
            kills += 1
          end
          kills
        end
      end
    end
  end
end
