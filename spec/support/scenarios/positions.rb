# frozen_string_literal: true

require "logger"

# Every position change of the partitions a group member
# (crash_consumer.rb) holds, appended to one file that all members of a
# run share (a line each, "<time> <pid> <what>"), so that a partition
# read again from an earlier offset can be traced to what moved it:
#
#   assigned / revoked <partitions>      the rebalance events
#   committed <p>=<offset> ... [error]   each commit's result (auto commits too)
#   error <type>: <error>                error.occurred
#   left behind [[p, offset], ...] ...   consumer.offsets_left_behind
#   first <p>@<offset>                   the first message of a partition a
#                                        block got since its (re)assignment
#   back <p>@<offset> after <highest>    a block got an offset far below the
#                                        highest one it got of that partition
#                                        (once a jump: the offset is the new highest)
#   librdkafka <FAC>: <line>             librdkafka's debug lines about
#                                        offsets (fetched committed offsets,
#                                        resets, seeks, commits, assignments)
#
# Cheap enough to leave on in the fault scenarios: librdkafka's "fetch"
# context (a line a fetch) is left out, and a message costs a Hash lookup.
class Positions
  # librdkafka's debug contexts whose lines say where a partition is.
  DEBUG = "cgrp,topic"
  # The facilities of those lines that are kept (the rest: metadata, heartbeats, ...).
  FACILITIES = %w[OFFSET OFFSETFETCH OFFSETCOMMIT COMMIT SEEK FETCHSTART ASSIGN ASSIGNMENT ASSIGNDONE REBALANCE REVOKE LOST CGRPOP
                  UNASSIGN CLEARASSIGN RESET PARTDEL STOREOFFSET ADDASSIGN REMOVEASSIGN SRVPEND BARRIER].freeze
  # "[<client>] <FAC>: <text>", as Sluice logs librdkafka's lines.
  KEPT = /\A\[[^\]]*\] (#{FACILITIES.join("|")}): /
  # How far below a partition's highest offset a block's message counts as
  # read again (blocks start out of order within each_message's window).
  BACK = 1_000

  def initialize(path)
    @file = File.open(path, "a")
    @file.sync = true
    @lock = Mutex.new
    @highest = {} # partition => the highest offset a block got
  end

  def say(what)
    line = "#{Time.now.utc.strftime("%H:%M:%S.%L")} #{Process.pid} #{what}\n"
    @lock.synchronize { @file.write(line) }
  end

  # A logger for the member's clients: warnings and worse, and librdkafka's offset lines.
  def logger(name)
    positions = self
    Logger.new(File::NULL, level: Logger::DEBUG).tap do |logger|
      logger.define_singleton_method(:add) do |severity, message = nil, _progname = nil, &block|
        message ||= block&.call
        text = message.to_s
        positions.say("#{name} #{Logger::SEV_LABEL[severity]} #{text}") if severity >= Logger::WARN || KEPT.match?(text)
        true
      end
    end
  end

  def watch(consumer)
    monitor = consumer.monitor
    monitor.subscribe("consumer.partitions_assigned") { |e| assigned(e[:partitions]) }
    monitor.subscribe("consumer.partitions_revoked") { |e| say("revoked #{e[:partitions].values.flatten.sort.join(",")}") }
    monitor.subscribe("consumer.offsets_committed") { |e| committed(e[:partitions], e[:error]) }
    monitor.subscribe("consumer.offsets_left_behind") do |e|
      say("left behind #{e[:partitions].values.flat_map(&:to_a).inspect} lost=#{e[:lost]} #{e[:error]}")
    end
    monitor.subscribe("error.occurred") { |e| say("error #{e[:type]}: #{e[:error]}") }
  end

  # What a run's file shows: each partition read again from far below what
  # a member had processed of it, with the highest offset committed before
  # (and the highest whose commit failed), and what the members met.
  # @return [Array<String>]
  def self.summary(path)
    committed = Hash.new(-1) # partition => highest offset committed
    failed = Hash.new(-1) # partition => highest offset a failed commit carried
    lines = File.foreach(path).filter_map { |line| summary_line(line, committed, failed) }
    text = File.read(path)
    lines << format("members' sessions timed out %<lost>d times (assignment lost), librdkafka reset an offset %<resets>d times (not counting " \
                    "partitions without a committed offset), consumer.offsets_left_behind %<left>d times",
                    lost: text.scan("SESSTMOUT").size, resets: text.scan(/offset reset.*\n/).count { |l| !l.include?("no previously committed") },
                    left: text.scan(" left behind ").size)
  end

  def self.summary_line(line, committed, failed)
    time, pid, what, rest = line.split(" ", 4)
    case what
    when "committed" then tally_commit(rest, committed, failed)
    when "first"
      partition, offset = rest.split("@").map { |part| Integer(part) }
      processed = [committed[partition], failed[partition]].max
      return unless offset + BACK < processed

      "#{time} #{pid} read partition #{partition} again from #{offset}: committed before #{committed[partition]}, " \
        "a failed commit carried #{failed[partition]}"
    end
  end

  def self.tally_commit(rest, committed, failed)
    error = rest.include?(" error ")
    rest.scan(/(\d+)=(\d+)/).each do |partition, offset|
      into = error ? failed : committed
      into[Integer(partition)] = [into[Integer(partition)], Integer(offset)].max
    end
    nil
  end

  # A block got message.
  def read(message)
    partition = message.partition
    offset = message.offset
    highest = @lock.synchronize do
      @highest[partition].tap { |before| @highest[partition] = offset if before.nil? || offset > before || offset < before - BACK }
    end
    if highest.nil?
      say("first #{partition}@#{offset}")
    elsif offset < highest - BACK
      say("back #{partition}@#{offset} after #{highest}")
    end
  end

  private

  # Assigned again, a partition's next message is a "first" again.
  def assigned(partitions)
    list = partitions.values.flatten.sort
    @lock.synchronize { list.each { |partition| @highest.delete(partition) } }
    say("assigned #{list.join(",")}")
  end

  def committed(partitions, error)
    offsets = partitions.values.flat_map { |by_partition| by_partition.sort.map { |partition, offset| "#{partition}=#{offset}" } }
    say("committed #{offsets.join(" ")}#{" error #{error}" if error}")
  end
end
