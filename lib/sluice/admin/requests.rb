# frozen_string_literal: true

module Sluice
  class Admin
    # The admin requests in flight and their results, matched by number.
    #
    # A request goes out with its number as librdkafka's opaque; its result
    # comes back on the client's main queue, which the poller (or the polling
    # thread) drains: #deliver runs there and wakes the caller, who waits on a
    # ConditionVariable (a waiting fiber lets the others run). A result nobody
    # waits for any more (timed out, interrupted) is dropped. The blocking
    # reads in progress (Transport#blocking) are counted here too: librdkafka
    # cannot wake one, and a close waits for them only until its deadline.
    class Requests
      include Shared::Clock

      def initialize
        @mutex = Mutex.new
        @arrived = ConditionVariable.new
        @next_id = 0
        @pending = {} # id => result, nil until it arrives
        @closed = false
        @answered = 0 # results the brokers answered (code >= 0: accepted or refused by a broker, not by librdkafka)
        @refusals = 0 # times every broker was down for an authentication or TLS failure
        @reads = 0 # blocking reads in progress
      end

      attr_reader :answered, :refusals

      # A number for the next request, waited for until #forget.
      def open
        @mutex.synchronize do
          @next_id += 1
          @pending[@next_id] = nil
          @next_id
        end
      end

      # From the poll: result is [id, error_code, message, payload].
      def deliver(result)
        @mutex.synchronize do
          @answered += 1 unless result[1].negative?
          next unless @pending.key?(result.first)

          @pending[result.first] = result
          @arrived.broadcast
        end
      end

      # Every broker is down for an authentication or TLS failure: the waiters
      # wake up to raise it.
      def refuse
        @mutex.synchronize do
          @refusals += 1
          @arrived.broadcast
        end
      end

      # The result of request id ([error_code, message, payload]), :closed once
      # #close was called, :refused once #refuse was called after the
      # `refusals` count, or nil when timeout_ms passed first.
      def wait(id, timeout_ms, refusals = @refusals)
        deadline = now + (timeout_ms / 1000.0)
        @mutex.synchronize do
          outcome = nil
          waiting_until(deadline) { outcome = @pending[id]&.drop(1) || (:closed if @closed) || (:refused if @refusals != refusals) }
          outcome
        end
      end

      # Counts the block (a blocking read) in while it runs.
      def reading
        @mutex.synchronize { @reads += 1 }
        begin
          yield
        ensure
          @mutex.synchronize do
            @reads -= 1
            @arrived.broadcast
          end
        end
      end

      # @return [Boolean] no blocking read runs any more; false once seconds passed first
      def reads_done?(seconds) = @mutex.synchronize { waiting_until(now + seconds) { @reads.zero? } }

      # Without waiting: the result if it arrived (a wait on the polling thread serves the queue itself).
      def result(id) = @mutex.synchronize { @pending[id]&.drop(1) }

      # Drops a request answered or given up on.
      def forget(id) = @mutex.synchronize { @pending.delete(id) }

      # Wakes every waiter: their client is gone.
      def close
        @mutex.synchronize do
          @closed = true
          @arrived.broadcast
        end
      end

      private

      # Under the mutex, until the block is true or deadline passed (every
      # change the block reads broadcasts @arrived). @return [Boolean] it became true
      def waiting_until(deadline)
        until yield
          left = deadline - now
          return false if left <= 0

          @arrived.wait(@mutex, left)
        end
        true
      end
    end
  end
end
