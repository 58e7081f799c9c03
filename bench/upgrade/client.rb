# frozen_string_literal: true

# A client process of bin/test-upgrade (bench/upgrade.rb), beside the consumers
# of spec/support/scenarios/crash_consumer.rb, and speaking like them: a line
# on stdout for each thing that happened, until its stdin is closed; then it
# closes its client and exits 0.
#
#   KIND=producer: an idempotent producer (acks=all) writing "<NAME>:<n>", n = 0, 1, ...
#     to TOPIC at RATE messages a second. Says "acked <n>" or "failed <n> <error>" for
#     each delivery report, in order, and at the end "produced <count>".
#   KIND=lag: an admin client asking GROUP's lag every half second. Says "lag <total>"
#     or "error <error>".
#
# Run as `ruby -I lib client.rb` with KAFKA_BROKERS, SLUICE_POLLING_MODE, KIND,
# and NAME, TOPIC, RATE (producer) or GROUP (lag). KAFKA_DEBUG: librdkafka's
# debug contexts, logged on stderr.
require "logger"
require "sluice"

$stdout.sync = true

def say(line) = $stdout.write("#{line}\n")

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

def configure(config, kafka)
  config.kafka = { "bootstrap.servers": ENV.fetch("KAFKA_BROKERS") }.merge(kafka)
  config.kafka[:debug] = ENV.fetch("KAFKA_DEBUG") if ENV.key?("KAFKA_DEBUG")
  config.logger = Logger.new($stderr, level: ENV.key?("KAFKA_DEBUG") ? Logger::DEBUG : Logger::WARN)
  config.logger.formatter = proc { |severity, time, _, message| "#{time.strftime("%H:%M:%S.%L")} #{severity} #{message}\n" }
end

# Set once stdin is closed: the run is over.
STOPPED = Thread.new { $stdin.read }

def stopped? = !STOPPED.alive?

# Delivery reports are awaited in order by a thread of their own, so that a
# stalled delivery (a node restarting) holds up neither the produce loop nor its pace.
def produce
  producer = Sluice::Producer.new do |config|
    configure(config, "enable.idempotence": true, acks: "all", "linger.ms": 5)
    config.polling.mode = ENV.fetch("SLUICE_POLLING_MODE", "fd").to_sym
  end
  handles = Queue.new
  reporter = Thread.new { report(handles) }
  count = produce_paced(producer, handles)
  handles << nil
  reporter.join
  say("produced #{count}")
  producer.close
end

# @return [Integer] messages handed to the producer
def produce_paced(producer, handles)
  name = ENV.fetch("NAME")
  topic = ENV.fetch("TOPIC")
  interval = 1.0 / Float(ENV.fetch("RATE"))
  count = 0
  next_at = now
  until stopped?
    handles << [count, producer.produce_async(topic: topic, payload: "#{name}:#{count}")]
    count += 1
    next_at += interval
    delay = next_at - now # read once: on a loaded machine a second read can be past next_at (sleep raises on < 0)
    sleep(delay) if delay.positive? # the pace, not a synchronisation
  end
  count
end

def report(handles)
  while (item = handles.pop)
    n, handle = item
    delivery = handle.wait(max_wait_timeout: 600_000, raise_response_error: false)
    say(delivery.success? ? "acked #{n}" : "failed #{n} #{delivery.error}")
  end
end

def poll_lag
  admin = Sluice::Admin.new { |config| configure(config, {}) }
  group = ENV.fetch("GROUP")
  until stopped?
    begin
      say("lag #{admin.lag(group).values.sum { |partitions| partitions.values.sum }}")
    rescue Sluice::Errors::BaseError => e
      say("error #{e.class}: #{e.message}")
    end
    STOPPED.join(0.5) # the poll interval, cut short by the end of the run
  end
  admin.close
end

ENV.fetch("KIND") == "producer" ? produce : poll_lag
