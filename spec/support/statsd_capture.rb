# frozen_string_literal: true

require "socket"

# A StatsD server as far as a spec needs one: a UDP socket on an ephemeral
# port whose lines are kept.
# Every line that arrived is read on a thread of its own: the per-message
# packets of a load would overflow the socket's buffer while the example waits.
class StatsdCapture
  # A default buffer (208 KiB) holds a few hundred datagrams: on a loaded
  # machine a statistics emission arriving while the reader thread waits for
  # the GVL was dropped, and a count summed from deltas never reached its
  # total. SO_RCVBUFFORCE passes net.core.rmem_max where the process may
  # (root, as in CI); elsewhere the buffer is as large as that allows.
  BUFFER = 16 << 20

  def initialize
    @socket = UDPSocket.new
    @socket.bind("127.0.0.1", 0)
    enlarge_buffer
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

  # Datagrams the kernel dropped because the socket's buffer was full; nil
  # where there is no /proc/net/udp (not Linux).
  def drops
    local = format(":%04X", port)
    row = File.foreach("/proc/net/udp").map(&:split).find { |fields| fields[1]&.end_with?(local) }
    row ? Integer(row[12]) : 0
  rescue Errno::ENOENT
    nil
  end

  def close
    @reader.kill.join
    @socket.close
  end

  private

  def enlarge_buffer
    @socket.setsockopt(Socket::SOL_SOCKET, Socket::SO_RCVBUFFORCE, BUFFER)
  rescue Errno::EPERM, NameError
    @socket.setsockopt(Socket::SOL_SOCKET, Socket::SO_RCVBUF, BUFFER)
  end

  def add(packet)
    @lock.synchronize do
      @lines.concat(packet.split("\n"))
      @arrived.broadcast
    end
  end
end
