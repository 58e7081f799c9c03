# frozen_string_literal: true

require "set"

module Soak
  # When acknowledged messages were never read, where each one is: it reads
  # the topic again from the start (its own consumer, outside the group, not
  # through the proxies) to find each missing message's partition and offset,
  # and sets that beside the group's committed offset and how far the group's
  # consumers read the partition. That tells apart a message the log does not
  # have (the broker or the producer lost it), one the committed offset
  # passed (the consumers skipped it), and one they never got to (a
  # partition left behind: stuck, paused or orphaned).
  class Autopsy
    LIMIT = 20 # missing messages described
    SCAN_SECONDS = 60

    def initialize(topic, group, direct)
      @topic = topic
      @group = group
      @direct = direct
    end

    # @param missing [Array<String>] payloads ("<id>:<seq>") acknowledged and never read
    # @param sink [Sink] the group's consumers
    # @return [Array<Hash>] what was found of each (at most LIMIT)
    def call(missing, sink)
      wanted = missing.first(LIMIT).to_set
      admin = Sluice::Admin.new do |config|
        config.kafka = { "bootstrap.servers": @direct }
        config.logger = Logger.new(nil)
      end
      committed = admin.committed_offsets(@group).fetch(@topic, {})
      highs = admin.describe_topic(@topic)[:partitions].to_h { |p| [p[:partition], admin.watermark_offsets(@topic, p[:partition]).last] }
      found = scan(wanted, highs)
      wanted.map { |payload| describe(payload, found[payload], committed, sink) }
    ensure
      admin&.close
    end

    private

    def describe(payload, (partition, offset), committed, sink)
      return { payload: payload, verdict: "not in the log" } unless partition

      done = committed[partition]
      verdict = done && done > offset ? "skipped: the group committed past it" : "not read: the group's consumers did not get to it"
      { payload: payload, partition: partition, offset: offset, committed: done, read_up_to: sink.read_up_to[partition],
        owners: sink.owners(@topic, partition), verdict: verdict }
    end

    # { payload => [partition, offset] } for the wanted payloads found.
    def scan(wanted, highs)
      consumer = Sluice::Consumer.new do |config|
        config.kafka = { "bootstrap.servers": @direct, "group.id": "sluice-soak-autopsy-#{SecureRandom.hex(4)}",
                         "enable.auto.commit": false }
        config.logger = Logger.new(nil)
      end
      left = highs.select { |_, high| high.positive? }
      consumer.assign(@topic => left.keys.to_h { |partition| [partition, 0] })
      found = {}
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + SCAN_SECONDS
      until left.empty? || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        next unless (message = consumer.poll(500))

        found[message.payload] = [message.partition, message.offset] if wanted.include?(message.payload)
        left.delete(message.partition) if message.offset + 1 >= left.fetch(message.partition, Float::INFINITY)
      end
      found
    ensure
      consumer&.close(timeout: 10_000)
    end
  end
end
