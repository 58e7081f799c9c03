# frozen_string_literal: true

require "rbconfig"

# A share-group member SIGKILLed with records acquired (issue 57 item 5): its records come back to the
# others once their lock ends (1 s here), none lost. The member is a process of its own.
RSpec.describe Sluice::ShareConsumer, :kafka, :share_groups do
  # The member: acquires a batch, says which offsets, then waits to be killed.
  let(:member_script) do
    <<~RUBY
      require "sluice"
      brokers, group, topic = ARGV
      consumer = Sluice::ShareConsumer.new do |config|
        config.kafka = { "bootstrap.servers": brokers, "group.id": group, "max.poll.records": 5 }
        config.acknowledgement = :explicit
      end
      consumer.subscribe(topic)
      records = []
      records = consumer.poll(1_000) while records.empty?
      $stdout.puts(records.map(&:offset).join(","))
      $stdout.flush
      sleep # mid-batch, nothing acknowledged, until SIGKILL
    RUBY
  end

  it "hands a SIGKILLed member's acquired records to the others after the lock, none lost" do
    produce_share_records(20)
    group = share_group("share.record.lock.duration.ms" => "1000")
    lib = File.expand_path("../../../lib", __dir__)
    member = IO.popen([RbConfig.ruby, "-I", lib, "-e", member_script, ShareGroups.brokers, group, share_topic])
    held = Timeout.timeout(30, RuntimeError, "the member acquired nothing within 30 s") { member.gets }.split(",").map(&:to_i)
    Process.kill(:KILL, member.pid)
    Process.wait(member.pid)
    member.close
    expect(held).not_to be_empty

    survivor = share_consumer(group)
    survivor.subscribe(share_topic)
    read = poll_records(survivor, 20)
    expect(read.map(&:offset).sort).to eq((0...20).to_a)
    expect(read.select { |record| held.include?(record.offset) }.map(&:delivery_count)).to all(eq(2))
    # (the member's fetch may have acquired more than its first batch: those come back the same way)
    expect(read.map(&:delivery_count)).to all(be_between(1, 2))
  end
end
