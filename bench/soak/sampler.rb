# frozen_string_literal: true

module Soak
  # One row a minute: this process's RSS, open fds and live threads, the
  # minute's end-to-end latencies, the lag and the message counts.
  class Sampler
    def initialize(load)
      @load = load
      @started = now
      @minute = 0
    end

    # @param faults [Array<String>] the faults of the minute
    # @return [Hash]
    def sample(faults)
      @minute += 1
      latencies = @load.sink.take_latencies.sort
      { minute: @minute, at: (now - @started).round, rss_mb: rss_mb, fds: Dir.children("/proc/self/fd").size,
        threads: Thread.list.count(&:alive?), p50_ms: percentile(latencies, 0.50), p99_ms: percentile(latencies, 0.99),
        lag: @load.lag, sent: @load.sent, acked: @load.acked, read: @load.sink.read, faults: faults }
    end

    private

    def rss_mb = (File.read("/proc/self/status")[/^VmRSS:\s+(\d+)/, 1].to_i / 1024.0).round(1)

    def percentile(sorted, fraction)
      return nil if sorted.empty?

      (sorted[((sorted.size - 1) * fraction).round] * 1000).round(1)
    end

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end
