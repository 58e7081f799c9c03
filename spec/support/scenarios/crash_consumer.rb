# frozen_string_literal: true

# A group member in a process of its own, for
# spec/integration/consumer/crash_recovery_spec.rb, which SIGKILLs it mid-stream
# and starts it again. It reads INPUT as a member of GROUP until its stdin is
# closed, then closes and exits 0, and tells the spec on stdout, a line each:
#
#   assigned <partition,...> / revoked <partition,...>
#   seen <payload>                 at least once: a message each_message handed out
#   committed <payload> ...        exactly once (TXN_ID given): a committed transaction
#                                  copied these to OUTPUT, their input offsets with them
#   open <count>                   exactly once: a transaction has produced its
#                                  batch's copies and added their offsets, and is not committed
#   failed <error>                 a transaction failed (its batch is read again)
#   reloaded <code>                exactly once: the producer rebuilt its client after a fatal error
#
# Run as `ruby -I lib crash_consumer.rb` with KAFKA_BROKERS,
# SLUICE_POLLING_MODE, GROUP, INPUT and, for exactly once, OUTPUT and TXN_ID.
# Optional: ASSIGNMENT (partition.assignment.strategy), MAX_FAILURES (failed
# transactions in a row before it gives up and exits 1; default 5),
# KAFKA_DEBUG (librdkafka's debug contexts, logged on stderr), BATCH_SECONDS
# (exactly once: each batch takes at least this long, its transaction
# included, as work would; a line "pace <seconds>" on stdin changes it),
# CONCURRENCY, ORDERING and WORK_SECONDS (at least once: see #at_least_once),
# GROUP_PROTOCOL ("consumer": KIP-848's, without the classic member settings
# below, as a member restarted into a group's online migration; default classic),
# POSITION_LOG (a file the member appends every position change of its
# partitions to: see Positions), DEAD_LETTER (at least once: see #failure_policy)
# and FIBERS (at least once: "1" reads inside Async, the blocks on its fibers).
require "logger"
require "sluice"
require_relative "positions"
require_relative "failing"

$stdout.sync = true

def say(line) = $stdout.write("#{line}\n")

POSITIONS = ENV.key?("POSITION_LOG") ? Positions.new(ENV.fetch("POSITION_LOG")) : nil

def kafka(extra)
  settings = { "bootstrap.servers": ENV.fetch("KAFKA_BROKERS") }.merge(extra)
  settings[:debug] = ENV.fetch("KAFKA_DEBUG") if ENV.key?("KAFKA_DEBUG")
  settings[:debug] ||= Positions::DEBUG if POSITIONS
  settings
end

def log_level = ENV.key?("KAFKA_DEBUG") ? Logger::DEBUG : Logger::WARN

def logger(name)
  return POSITIONS.logger(name) if POSITIONS && !ENV.key?("KAFKA_DEBUG")

  Logger.new($stderr, level: log_level, progname: name).tap do |logger|
    logger.formatter = proc { |severity, time, progname, message| "#{time.strftime("%H:%M:%S.%L")} #{progname} #{severity} #{message}\n" }
  end
end

def mode = ENV.fetch("SLUICE_POLLING_MODE", "fd").to_sym

# The classic protocol's member settings: a SIGKILLed member is replaced
# after 6 s, a rebalance is heard of within half a second.
def member_settings
  return { "group.protocol": "consumer" } if ENV["GROUP_PROTOCOL"] == "consumer" # the broker's group.consumer.* instead

  assignment = ENV.key?("ASSIGNMENT") ? { "partition.assignment.strategy": ENV.fetch("ASSIGNMENT") } : {}
  { "session.timeout.ms": 6_000, "heartbeat.interval.ms": 500, **assignment }
end

def build_consumer(exactly_once)
  consumer = Sluice::Consumer.new do |config|
    config.kafka = kafka("group.id": ENV.fetch("GROUP"), "auto.offset.reset": ENV.fetch("RESET", "earliest"), "auto.commit.interval.ms": 500,
                         "enable.auto.commit": !exactly_once, **member_settings)
    config.polling.mode = mode
    config.logger = logger("consumer")
  end
  consumer.monitor.subscribe("consumer.partitions_assigned") { |e| say("assigned #{e[:partitions].values.flatten.join(",")}") }
  consumer.monitor.subscribe("consumer.partitions_revoked") { |e| say("revoked #{e[:partitions].values.flatten.join(",")}") }
  consumer.monitor.subscribe("error.occurred") { |e| warn("consumer error.occurred #{e[:type]}: #{e[:error]}") }
  POSITIONS&.watch(consumer)
  consumer
end

def build_producer
  producer = Sluice::Producer.new do |config|
    config.kafka = kafka("transactional.id": ENV.fetch("TXN_ID"), "linger.ms": 5)
    config.polling.mode = mode
    config.logger = logger("producer")
    config.wait_timeout_on_transaction_abort = 5_000 # librdkafka issue 4849: see Sluice::Producer::Config
  end
  producer.monitor.subscribe("producer.reloaded") { |e| say("reloaded #{e[:error].code}") }
  producer.monitor.subscribe("error.occurred") { |e| warn("producer error.occurred #{e[:type]}: #{e[:error]}") }
  producer
end

# At least once: each_message stores a message's offset once the block
# returned; librdkafka commits stored offsets every 500 ms.
# CONCURRENCY (default 1) and ORDERING (default key): each_message's
# concurrency: and ordering: (a line is said as each block starts);
# WORK_SECONDS: each block's sleep (default 0.002).
def at_least_once(consumer)
  concurrency = Integer(ENV.fetch("CONCURRENCY", "1"))
  work = Float(ENV.fetch("WORK_SECONDS", "0.002"))
  handler = ENV.key?("DEAD_LETTER") ? Failing::Handler.new : nil
  consumer.each_message(concurrency: concurrency, ordering: ENV.fetch("ORDERING", "key").to_sym, **failure_policy(consumer)) do |message|
    say("seen #{message.payload}")
    POSITIONS&.read(message)
    sleep(work) # some work: offsets are stored and committed before the spec's SIGKILL
    next unless handler

    handler.call(message.payload)
    say("ok #{message.payload}")
  end
end

# DEAD_LETTER (a topic): the blocks fail as Failing decides, 3 attempts, then
# the dead-letter topic; a line "dead <partition>/<offset>" once a dead letter
# is acknowledged (its offset stored after it).
def failure_policy(consumer)
  return {} unless ENV.key?("DEAD_LETTER")

  consumer.monitor.subscribe("consumer.dead_lettered") { |e| say("dead #{e[:partition]}/#{e[:offset]}") }
  { retries: { attempts: 3, backoff: 0.01..0.05 }, dead_letter: ENV.fetch("DEAD_LETTER") }
end

# FIBERS=1: inside Async, the blocks run on fibers of its scheduler.
def read_at_least_once(consumer)
  return at_least_once(consumer) unless ENV["FIBERS"] == "1"

  require "async"
  Async { at_least_once(consumer) }.wait
end

# Exactly once: consume, transform (a copy), produce, with the input offsets
# committed in the same transaction as the output.
def exactly_once(consumer)
  producer = build_producer
  # Fences the previous incarnation first: its transaction (open when it was
  # killed) is aborted now, and its pending offsets no longer hold up this
  # consumer's offset fetch (librdkafka asks for stable offsets).
  producer.transaction { nil }
  failures = 0 # in a row
  begin
    consumer.each_batch(max_items: 100, max_wait: 200) do |batch|
      began = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      transform(producer, consumer, batch)
      failures = 0
      pace(began)
    end
  rescue Sluice::Errors::TransactionError => e
    say("failed #{e.message}")
    retry if (failures += 1) < Integer(ENV.fetch("MAX_FAILURES", "5")) # each_batch rewound the batch's partitions: read again
    raise
  ensure
    producer.close
  end
end

# How long a batch takes at least (s): BATCH_SECONDS, then what stdin says.
module Pace
  class << self
    attr_accessor :seconds
  end
end
Pace.seconds = Float(ENV.fetch("BATCH_SECONDS", "0"))

def pace(began)
  left = Pace.seconds - (Process.clock_gettime(Process::CLOCK_MONOTONIC) - began)
  sleep(left) if left.positive? # the rest of the batch's work, outside its transaction
end

def transform(producer, consumer, batch)
  producer.transaction do
    batch.each { |message| producer.produce_async(topic: ENV.fetch("OUTPUT"), key: message.payload, payload: message.payload) }
    producer.transaction_mark_as_consumed(consumer, batch) # per partition, the offset after its last message
    say("open #{batch.size}")
  end
  say("committed #{batch.map(&:payload).join(" ")}")
end

exactly_once = ENV.key?("TXN_ID")
consumer = build_consumer(exactly_once)
consumer.subscribe(ENV.fetch("INPUT"))
Thread.new do
  $stdin.each_line { |line| Pace.seconds = Float(line[/\Apace (\S+)/, 1]) if line.start_with?("pace ") }
  consumer.stop
end
exactly_once ? exactly_once(consumer) : read_at_least_once(consumer)
consumer.close
say("closed")
