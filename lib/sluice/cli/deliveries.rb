# frozen_string_literal: true

module Sluice
  module CLI
    # The delivery handles of a long produce, each with its input line,
    # waited for in windows (memory stays bounded however long the input),
    # counted, and reported: a progress line every `progress` messages, the
    # first few failures, and a summary. When the run is interrupted, the
    # summary says which input line a rerun resumes from.
    #
    # Entries are settled in input order, and counted and removed in steps
    # that no signal splits (Thread.handle_interrupt): wherever Ctrl-C lands,
    # every message sent is counted exactly once.
    class Deliveries
      WINDOW = 10_000 # handles waited for at a time, once twice as many are pending
      SHOWN_FAILURES = 5 # failures told one by one; the summary counts the rest
      # A purge at close: the message may have been written (a purged
      # message can be one sent with no answer yet), so it is not known.
      PURGED = %i[purge_queue purge_inflight].freeze
      DEFERRED = { Object => :never }.freeze # Thread.handle_interrupt: no signal inside

      # Messages counted so far: sent, delivered, failed.
      attr_reader :sent, :delivered, :failed

      # @param progress [Integer] messages between progress lines (0: none)
      # @param wait_ms [Integer] how long a handle is waited for
      def initialize(stderr, progress:, wait_ms:)
        @stderr = stderr
        @progress = progress
        @next_progress = progress.positive? ? progress : nil
        @wait_ms = wait_ms
        @lines = [] # the input line of each pending entry
        @pending = [] # DeliveryHandle, or the error that refused the message
        @sent = @delivered = @failed = @unknown = 0
        @first_missing = nil # the first input line whose message was not delivered
        @delivered_after = 0 # messages delivered from lines after it
        @started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      end

      # Counts a message sent from input line `line`. Call it with signals
      # deferred, together with the produce call.
      # @param handle [DeliveryHandle]
      def add(handle, line) = enqueue(line, handle)

      # A message that never reached librdkafka (refused before it was sent).
      def refused(line, error) = enqueue(line, error)

      # Waits for the oldest handles once twice WINDOW are pending (memory
      # stays bounded). A signal may end the wait.
      def settle_window
        settle(@wait_ms) { @pending.size > WINDOW } if @pending.size >= 2 * WINDOW
      end

      # Waits for every handle still pending (the producer: LineDeliveries' interface).
      def finish(_producer = nil) = settle(@wait_ms) { @pending.any? }

      # Counts what is settled without waiting: a handle still pending is not known.
      def finish_now(_producer = nil) = settle(0) { @pending.any? }

      # @return [String] the line printed at the end: delivered, sent, failed, rate
      def summary(topic)
        ProduceReport.summary(topic, counts, rate)
      end

      # @param signal [String] the signal's name (INT, TERM)
      # @param lines [Integer] input lines read
      # @return [Array<String>] the summary of an interrupted run: counts and where a rerun resumes
      def interrupted_summary(topic, signal, lines)
        ProduceReport.interrupted(topic, signal, lines, counts, resume: @first_missing || (lines + 1), again: @delivered_after)
      end

      def failed? = @failed.positive?

      private

      def enqueue(line, entry)
        @lines << line
        @pending << entry
        @sent += 1
        progress_line if @sent == @next_progress
      end

      # Waits for the oldest entry (a signal may end the wait), then counts
      # it and every settled entry after it in one deferred step.
      def settle(wait_ms)
        while yield
          outcome = outcome(@lines.first, @pending.first, wait_ms)
          Thread.handle_interrupt(DEFERRED) do
            take(outcome)
            take(outcome(@lines.first, @pending.first, nil)) while settled?(@pending.first)
          end
        end
      end

      def settled?(entry) = entry.is_a?(Exception) || (entry && !entry.pending?)

      def take(outcome)
        record(@lines.shift, outcome)
        @pending.shift
      end

      # @param wait_ms [Integer, nil] nil: the entry is settled already
      # @return [Symbol, String] :delivered, :unknown, or a failure's text
      def outcome(line, entry, wait_ms)
        return "line #{line}: #{entry.message}" if entry.is_a?(Exception)

        error = (wait_ms ? entry.wait(max_wait_timeout: wait_ms, raise_response_error: false) : entry).error
        return :delivered unless error

        PURGED.include?(error.code) ? :unknown : "delivery failed: #{error.message}"
      rescue Errors::WaitTimeoutError
        wait_ms.zero? ? :unknown : "no delivery report within #{wait_ms} ms"
      end

      def record(line, outcome)
        if outcome == :delivered
          @delivered += 1
          @delivered_after += 1 if @first_missing
          return
        end

        @first_missing ||= line
        outcome == :unknown ? @unknown += 1 : failure(outcome)
      end

      def failure(line)
        @failed += 1
        @stderr.puts("sluice produce: #{line}") if @failed <= SHOWN_FAILURES
        @stderr.puts("sluice produce: (further failures are only counted)") if @failed == SHOWN_FAILURES + 1
      end

      def progress_line
        @stderr.puts(ProduceReport.progress(counts, rate))
        @next_progress += @progress
      end

      def rate = ProduceReport.rate(@sent, @started)

      def counts = { sent: @sent, delivered: @delivered, failed: @failed, unknown: @unknown }
    end
  end
end
