# frozen_string_literal: true

# Sluice::ShareConsumer against a broker with share groups (issue 57 items 2, 4 and 5): records shared
# between the members of one partition, acknowledged one by one. Each example has its own topic and group.
RSpec.describe Sluice::ShareConsumer, :kafka, :share_groups do
  it "reads each record once in implicit mode, accepts it, and reports the acknowledgement commit" do
    produce_share_records(5)
    consumer = share_consumer(share_group)
    committed = Queue.new
    consumer.monitor.subscribe("share_consumer.acknowledgements_committed") { |event| committed << event.payload }
    consumer.subscribe(share_topic)
    read = []
    consumer.each_message do |record|
      read << [record.payload, record.delivery_count]
      consumer.stop if read.size == 5
    end
    expect(read).to eq((0...5).map { |i| ["record-#{i}", 1] })
    expect(consumer.close).to be(true)
    outcome = committed.pop
    expect(outcome).to include(topic: share_topic, partition: 0, offsets: [0, 1, 2, 3, 4], error: nil)
  end

  it "shares one partition between two and between three members: distinct records, together all of them" do
    [2, 3].each do |members|
      topic = "sluice-spec-share-#{SecureRandom.hex(4)}".tap { |name| share_admin.create_topic(name, partitions: 1) }
      group = share_group
      consumers = Array.new(members) { share_consumer(group, kafka: { "max.poll.records": 5 }) }
      # Every member joined (one empty poll each, and the group's assignment) before any record exists.
      consumers.each do |consumer|
        consumer.subscribe(topic)
        consumer.poll(0)
      end
      produce_share_records(30 * members, topic)
      seen = Queue.new
      readers = consumers.each_with_index.map do |consumer, index|
        Thread.new do
          consumer.each_message do |record|
            sleep(0.01) # 10 ms of work: the others take records meanwhile
            seen << [index, record.offset]
          end
        end
      end
      got = Array.new(30 * members) { pop_within(seen, 30) }
      consumers.each(&:stop)
      readers.each(&:join)
      expect(got.map(&:last).sort).to eq((0...(30 * members)).to_a)
      expect(got.map(&:first).uniq.size).to eq(members), "each member read some: #{got.map(&:first).tally}"
    end
  end

  it "delivers a released record again with delivery_count + 1, and a rejected one never" do
    produce_share_records(3)
    consumer = share_consumer(share_group, acknowledgement: :explicit)
    consumer.subscribe(share_topic)
    first = poll_records(consumer, 3)
    expect(first.map { |record| [record.offset, record.delivery_count] }).to eq([[0, 1], [1, 1], [2, 1]])
    consumer.release(first[0])
    consumer.reject(first[1])
    consumer.accept(first[2])
    produce_share_records(2) # offsets 3 and 4: read after them, the rejected record would have come too
    again = poll_records(consumer, 3) { |record| consumer.accept(record) }
    expect(again.map { |record| [record.offset, record.delivery_count] }).to contain_exactly([0, 2], [3, 1], [4, 1])
    expect(consumer.poll(500)).to eq([])
  end

  it "gives a record whose lock ran out to another member, delivery_count + 1" do
    produce_share_records(2)
    group = share_group("share.record.lock.duration.ms" => "1000")
    holder = share_consumer(group, acknowledgement: :explicit)
    holder.subscribe(share_topic)
    held = poll_records(holder, 2) # never acknowledged
    expect(held.map(&:delivery_count)).to eq([1, 1])
    other = share_consumer(group)
    other.subscribe(share_topic)
    expect(poll_records(other, 2).map { |record| [record.offset, record.delivery_count] }).to eq([[0, 2], [1, 2]])
  end

  it "archives a record released share.delivery.count.limit times: a poison record ends" do
    produce_share_records(1)
    consumer = share_consumer(share_group("share.delivery.count.limit" => "2"), acknowledgement: :explicit)
    consumer.subscribe(share_topic)
    counts = []
    2.times do
      poll_records(consumer, 1) do |record|
        counts << record.delivery_count
        consumer.release(record)
      end
    end
    produce_share_records(1) # offset 1 comes; offset 0, archived, does not
    last = poll_records(consumer, 1) { |record| consumer.accept(record) }
    expect(counts).to eq([1, 2])
    expect(last.map { |record| [record.offset, record.delivery_count] }).to eq([[1, 1]])
  end

  it "releases what an implicit-mode block raised on, and the rest of its batch: they come back" do
    produce_share_records(3)
    consumer = share_consumer(share_group)
    consumer.subscribe(share_topic)
    read = []
    expect do
      consumer.each_message do |record|
        read << [record.offset, record.delivery_count]
        raise "handler failed" if record.offset == 1
      end
    end.to raise_error(RuntimeError, "handler failed")
    consumer.each_message do |record|
      read << [record.offset, record.delivery_count]
      consumer.stop if record.offset == 2
    end
    expect(read).to eq([[0, 1], [1, 1], [1, 2], [2, 2]])
  end

  it "refuses a poll in explicit mode while the last batch has records left unacknowledged, at the call" do
    produce_share_records(2)
    consumer = share_consumer(share_group, acknowledgement: :explicit)
    consumer.subscribe(share_topic)
    records = poll_records(consumer, 2)
    consumer.accept(records.first)
    error = expect_within(1, guards: "a poll that would wait its 10 s timeout") do
      consumer.poll(10_000)
    rescue Sluice::Errors::UnacknowledgedRecordsError => e
      e
    end
    expect(error).to be_a(Sluice::Errors::UnacknowledgedRecordsError)
    expect(error.records.map(&:offset)).to eq([1])
  end

  it "stops each_message from another thread within a poll slice, and closes within its bound" do
    consumer = share_consumer(share_group)
    consumer.subscribe(share_topic)
    waiting = Queue.new
    reader = Thread.new { waiting << :reading && consumer.each_message { nil } }
    waiting.pop
    consumer.stop
    expect(reader.join(2)).to be(reader), "each_message did not end within 2 s of stop (its poll slice is 100 ms)"
    expect(expect_within(8, guards: "close's max_wait_timeout (10 s)") { consumer.close }).to be(true)
    expect { consumer.poll }.to raise_error(Sluice::Errors::ConsumerClosedError)
  end

  it "ends a poll's wait within its slice on Thread#raise, and the consumer still reads" do
    consumer = share_consumer(share_group)
    consumer.subscribe(share_topic)
    waiting = Queue.new
    reader = Thread.new do
      waiting << :polling
      consumer.poll(10_000)
    rescue Interrupt => e
      e
    end
    waiting.pop
    expect_within(2, guards: "the poll's 10 s timeout (a slice is 100 ms)") do
      reader.raise(Interrupt)
      expect(reader.value).to be_a(Interrupt)
    end
    produce_share_records(1)
    expect(poll_records(consumer, 1).map(&:offset)).to eq([0])
  end

  it "lets other fibers run while a fiber's poll waits, under a fiber scheduler", :async do
    consumer = share_consumer(share_group)
    consumer.subscribe(share_topic)
    ticks = []
    Async do |task|
      ticker = task.async do
        loop do
          ticks << monotonic
          sleep(0.005)
        end
      end
      expect_within(3, guards: "a poll of 1 s that would hold the thread") { consumer.poll(1_000) }
      ticker.stop
    end.wait
    expect(ticks.size).to be >= 50 # 1 s of 5 ms ticks would be 1 with the thread held
  end

  it "reads and sets a share group's own configs through Admin (group:)" do
    group = share_group("share.delivery.count.limit" => "3")
    expect(share_admin.describe_configs(group: group)).to include("share.auto.offset.reset" => "earliest", "share.delivery.count.limit" => "3")
    expect { share_admin.describe_configs(group: group, topic: share_topic) }.to raise_error(ArgumentError, /one of topic:, broker: or group:/)
  end
end
