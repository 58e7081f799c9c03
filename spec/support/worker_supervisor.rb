# frozen_string_literal: true

require "rspec/expectations"
require_relative "condition_wait"

# What every supervisor of worker processes (ConsumerGroups::Worker) shares:
# the bench's clients (bench/upgrade/clients.rb) and the exactly-once slots
# (spec/cluster/exactly_once_workers.rb). The workers' stdout lines arrive on
# one queue, read by one thread, each recorded (#record) under the lock, which
# then wakes every #await: the caller waits on a condition, never on the clock.
# A subclass starts the reading (#start_reading) once it can record, and says
# what a worker that exited on its own looks like (#raise_exited) and what it
# knows (#state).
class WorkerSupervisor
  include ConditionWait

  def initialize
    @lines = Queue.new
    @lock = Mutex.new
    @changed = ConditionVariable.new
  end

  # Waits (at most seconds) until the block, run under the lock, is true.
  # A worker that exited on its own fails at once.
  # @return [Boolean] whether the block became true (false: only without raise_on_timeout)
  def await(what, seconds, raise_on_timeout: true)
    @lock.synchronize do
      return true if wait_for(seconds) { yield || raise_exited }
      raise RSpec::Expectations::ExpectationNotMetError, "#{what}: not within #{seconds}s (#{state})" if raise_on_timeout
    end
    false
  end

  def read(&) = @lock.synchronize(&)

  private

  def start_reading = @reader = Thread.new { read_lines }

  def stop_reading
    @lines << :stop
    @reader.join(10)
  end

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # The longest time (s) between from and till without one of times (a time
  # after till ends the last pause; none: it lasts until till).
  def longest_pause(times, from, till)
    inside = times.select { |at| at > from && at <= till }
    after = times.find { |at| at > till } || till
    [from, *inside, after].each_cons(2).map { |a, b| b - a }.max
  end

  # "1,2,3" (a worker's assigned/revoked line) as numbers.
  def numbers(list) = list.to_s.split(",").map { |number| Integer(number) }

  def read_lines
    while (item = @lines.pop) != :stop
      @lock.synchronize do
        record(*item)
      ensure
        @changed.broadcast
      end
    end
  end
end
