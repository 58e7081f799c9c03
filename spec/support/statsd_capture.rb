# frozen_string_literal: true

require "socket"

# A StatsD server as far as a spec needs one: a UDP socket on an ephemeral
# port whose lines are kept.
# Every line that arrived is read on a thread of its own: the per-message
# packets of a load would overflow the socket's buffer while the example waits.
class StatsdCapture
  def initialize
    @socket = UDPSocket.new
    @socket.bind("127.0.0.1", 0)
    @lock = Mutex.new
    @arrived = ConditionVariable.new
    @lines = []
    @reader = Thread.new { loop { add(@socket.recv(65_535)) } }
  end

  def port = @socket.addr[1]
  def lines = @lock.synchronize { @lines.dup }

  # Waits until the block is true of the lines (at most `seconds`).
  def await(seconds = 10)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
    @lock.synchronize do
      until yield(@lines)
        left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
        raise "not sent within #{seconds}s" unless left.positive?

        @arrived.wait(@lock, left)
      end
    end
  end

  def close
    @reader.kill.join
    @socket.close
  end

  private

  def add(packet)
    @lock.synchronize do
      @lines.concat(packet.split("\n"))
      @arrived.broadcast
    end
  end
end
