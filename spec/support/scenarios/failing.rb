# frozen_string_literal: true

require "zlib"

# The failing handler of spec/cluster/failure_faults_spec.rb's members
# (crash_consumer.rb with DEAD_LETTER), and what the spec expects of it.
# Whether a message fails is decided by its payload alone, the same in every
# process: 1% fail every attempt (dead-lettered), 5% fail their first
# attempt in a process and then succeed (retried in place).
module Failing
  # Raised by every attempt of a permanent message.
  class Permanent < StandardError; end
  # Raised by a transient message's first attempt in a process.
  class Transient < StandardError; end

  # @return [Symbol] :permanent, :transient or :ok
  def self.kind(payload)
    case Zlib.crc32(payload) % 100
    when 0 then :permanent
    when 1..5 then :transient
    else :ok
    end
  end

  # One per process: remembers which transient messages already failed here
  # (a process started after a SIGKILL fails them once again).
  class Handler
    def initialize
      @failed = {}
      @lock = Mutex.new
    end

    def call(payload)
      case Failing.kind(payload)
      when :permanent then raise Permanent, "#{payload} always fails"
      when :transient then raise Transient, "#{payload} fails once" if first_failure?(payload)
      end
    end

    private

    def first_failure?(payload) = @lock.synchronize { !@failed.key?(payload) && (@failed[payload] = true) }
  end
end
