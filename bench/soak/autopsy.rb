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
    # @param sources [Array<Source>] the producers (where their reports placed each message)
    # @return [Array<Hash>] what was found of each (at most LIMIT)
    def call(missing, sink, sources)
      wanted = missing.first(LIMIT).to_set
      reported = wanted.to_h do |payload|
        id, seq = payload.split(":").map { |part| Integer(part) }
        [payload, sources.fetch(id).placed[seq]]
      end
      admin = Sluice::Admin.new do |config|
        config.kafka = { "bootstrap.servers": @direct }
        config.logger = Logger.new(nil)
      end
      committed = admin.committed_offsets(@group).fetch(@topic, {})
      marks = admin.describe_topic(@topic)[:partitions].to_h { |p| [p[:partition], admin.watermark_offsets(@topic, p[:partition])] }
      found, at_reported = scan(wanted, reported.values.to_set, marks.transform_values(&:last))
      wanted.map do |payload|
        place = reported.fetch(payload)
        describe(payload, found[payload], committed, sink)
          .merge(reported: place.join("@"), at_reported: at_reported[place], log: marks[place.first]&.join(".."))
      end
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

    # { payload => [partition, offset] } for the wanted payloads found, and
    # { [partition, offset] => payload } for the places asked about.
    def scan(wanted, places, highs)
      consumer = Sluice::Consumer.new do |config|
        config.kafka = { "bootstrap.servers": @direct, "group.id": "sluice-soak-autopsy-#{SecureRandom.hex(4)}",
                         "enable.auto.commit": false }
        config.logger = Logger.new(nil)
      end
      left = highs.select { |_, high| high.positive? }
      consumer.assign(@topic => left.keys.to_h { |partition| [partition, 0] })
      found = {}
      at = {}
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + SCAN_SECONDS
      until left.empty? || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        next unless (message = consumer.poll(500))

        found[message.payload] = [message.partition, message.offset] if wanted.include?(message.payload)
        at[[message.partition, message.offset]] = message.payload if places.include?([message.partition, message.offset])
        left.delete(message.partition) if message.offset + 1 >= left.fetch(message.partition, Float::INFINITY)
      end
      [found, at]
    ensure
      consumer&.close(timeout: 10_000)
    end
  end
end
