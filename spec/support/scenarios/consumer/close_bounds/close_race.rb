# frozen_string_literal: true

# A scenario of spec/integration/consumer/close_bounds_spec.rb, in a process of its own.
#
# Item 7: close from three threads while others make group calls.
require_relative "../../setup"
require_relative "helpers"

produce_some(30)
rounds = Integer(ENV.fetch("SLUICE_CLOSE_ROUNDS", "12"))
slowest = 0.0
wrong = Hash.new(0)
rounds.times do
  consumer = make_consumer(max_wait_timeout: 3_000)
  consumer.subscribe(TOPIC)
  reading = Queue.new
  reader = Thread.new { consumer.each_message { reading << true if reading.empty? } }
  reading.pop # partitions assigned, messages flowing
  stop = false
  calls = lambda do |&body|
    Thread.new do
      body.call until stop
    rescue Sluice::Errors::ConsumerClosedError
      nil
    rescue Sluice::Errors::BaseError => e
      wrong[e.class.name] += 1
      retry unless stop
    end
  end
  committing = calls.call do
    consumer.commit
    consumer.committed
    consumer.assignment
  end
  pausing = calls.call do
    consumer.assignment.each do |t, ps|
      ps.each do |p|
        consumer.pause(t, p)
        consumer.resume(t, p)
      end
    end
  end
  busy = [committing, pausing]
  started = now
  closers = Array.new(3) { Thread.new { consumer.close(timeout: 3_000) } }
  closers.each(&:join)
  slowest = [slowest, now - started].max
  stop = true
  (busy + [reader]).each { |t| t.join(10) or raise "a thread did not return after close" }
end
result("rounds" => rounds, "slowest" => slowest, "wrong_errors" => wrong)
