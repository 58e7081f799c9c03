# frozen_string_literal: true

module Sluice
  class Consumer
    # Workers' workers as threads of their own (no fiber scheduler in the
    # calling fiber). #stop kills them: a running block is interrupted
    # wherever it is, as Timeout would interrupt it, and its ensure clauses run.
    class ThreadPool
      include Shared::Clock

      # Starts count threads, each running the block (Workers' loop).
      def initialize(count, &serve)
        @threads = Array.new(count) do |i|
          Thread.new do
            Thread.current.name = "sluice.consumer-worker-#{i}"
            serve.call
          end
        end
      end

      # @return [Boolean] the caller runs on one of the pool's threads (inside a block)
      def current? = @threads.include?(Thread.current)

      # The caller's worker, as Workers keys what each runs (a block's own fibers are of its thread).
      def worker = Thread.current

      # Kills every thread and waits at most seconds for them to end: a block's ensure may not return.
      def stop(seconds)
        @threads.each(&:kill)
        deadline = now + seconds
        @threads.each { |thread| thread.join([deadline - now, 0].max) }
      end
    end
  end
end
