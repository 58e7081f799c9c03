# frozen_string_literal: true

require "async"

# Consumer#store_offset and Consumer#commit with offsets, called from a block
# of each_message(concurrency: N): refused past a message of the partition
# whose block has not finished (README: "no offset stored past unfinished
# work"), as Karafka's virtual offsets refuse it. A block may still store its
# own message's offset once every lower one finished. Synchronised on
# queues: each block waits for what the example lets it do.
RSpec.describe "Consumer#store_offset inside each_message with concurrency", :kafka do
  include ParallelReads

  let(:first) { produce(%w[m0 m1 m2]) }
  let(:orders) { (first..(first + 2)).to_h { |offset| [offset, Queue.new] } } # each block's orders
  let(:started) { Queue.new }
  let(:results) { Queue.new }

  # Without auto commit: the read commits what it stored every 0.5 s
  # (ParallelReading::COMMIT_EVERY), all three once finished; these examples
  # look at what the blocks' own calls commit.
  def build_consumer(**kafka) = super("enable.auto.commit": false, **kafka)

  # each_message's block: says it started, then runs what the example sends
  # it (a Proc of the message; a refusal is its result) until told :done.
  def block_taking_orders
    lambda do |message|
      started << message.offset
      while (order = orders.fetch(message.offset).pop) != :done
        results << begin
          order.call(message)
        rescue Sluice::Errors::BaseError => e
          e
        end
      end
    end
  end

  # Blocks on first..first+2 all run: first+2 is refused past first (its
  # store_offset and its commit), first stores its own.
  def refuse_and_store(consumer, pop)
    expect(Array.new(3) { pop.call(started) }.sort).to eq(orders.keys)
    orders[first + 2] << ->(message) { consumer.store_offset(message) }
    refused = pop.call(results)
    expect(refused).to be_a(Sluice::Errors::OffsetPastUnfinishedError)
    expect(refused.message).to include("store_offset", "offset #{first + 3} of #{topic}/0 past offset #{first},", "return from the block")
    orders[first + 2] << ->(_) { consumer.commit(topic => { 0 => first + 3 }) }
    expect(pop.call(results)).to be_a(Sluice::Errors::OffsetPastUnfinishedError)
    # The lowest block: nothing below it is unfinished, its siblings above do not count.
    orders[first] << lambda { |message|
      consumer.store_offset(message)
      consumer.commit
      :stored
    }
    expect(pop.call(results)).to eq(:stored)
    orders.each_value { |order| order << :done }
    consumer.stop
  end

  it "refuses an offset past a sibling not finished, and stores a block's own once none below is unfinished" do
    consumer = reader(0 => first)
    reading = Thread.new { consumer.each_message(concurrency: 3, ordering: :none, &block_taking_orders) }
    refuse_and_store(consumer, method(:pop_within))
    reading.join(30) or raise "each_message did not return"
    reading.value
    expect(committed_offset).to eq(first + 1) # nothing past m0 went to the group
  end

  it "refuses it in blocks that run as fibers of a scheduler (FiberPool) too" do
    consumer = reader(0 => first)
    Async do |task|
      reading = task.async { consumer.each_message(concurrency: 3, ordering: :none, &block_taking_orders) }
      refuse_and_store(consumer, ->(queue) { task.with_timeout(20) { queue.pop } })
      reading.wait
    end.wait
    expect(committed_offset).to eq(first + 1)
  end
end
