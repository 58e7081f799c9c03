# frozen_string_literal: true

module Sluice
  module CLI
    # The delivery handles of a long produce, waited for in windows (memory
    # stays bounded however long the input), counted, and reported: a
    # progress line every `progress` messages, the first few failures, and a
    # summary.
    class Deliveries
      WINDOW = 10_000 # handles waited for at a time, once twice as many are pending
      SHOWN_FAILURES = 5 # failures told one by one; the summary counts the rest

      # Messages counted so far: sent, delivered, failed.
      attr_reader :sent, :delivered, :failed

      # @param progress [Integer] messages between progress lines (0: none)
      # @param wait_ms [Integer] how long a handle is waited for
      def initialize(stderr, progress:, wait_ms:)
        @stderr = stderr
        @progress = progress
        @wait_ms = wait_ms
        @pending = []
        @sent = @delivered = @failed = 0
        @started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      end

      # Counts a message sent; waits for the oldest handles once twice WINDOW
      # are pending (memory stays bounded), and prints progress.
      # @param handle [DeliveryHandle]
      def add(handle)
        @pending << handle
        @sent += 1
        settle(@pending.shift(WINDOW)) if @pending.size >= 2 * WINDOW
        progress_line if @progress.positive? && (@sent % @progress).zero?
      end

      # A message that never reached librdkafka (refused before it was sent).
      def refused(what, error)
        @sent += 1
        failure("#{what}: #{error.message}")
      end

      # Waits for every handle still pending.
      def finish = settle(@pending.slice!(0..))

      # @return [String] the line printed at the end: delivered, sent, failed, rate
      def summary(topic)
        "sluice produce: #{@delivered} of #{@sent} message(s) delivered to #{topic}, #{@failed} failed (#{rate} msg/s)"
      end

      def failed? = @failed.positive?

      private

      def settle(handles)
        handles.each do |handle|
          report = handle.wait(max_wait_timeout: @wait_ms, raise_response_error: false)
          report.error ? failure("delivery failed: #{report.error.message}") : @delivered += 1
        rescue Errors::WaitTimeoutError
          failure("no delivery report within #{@wait_ms} ms")
        end
      end

      def failure(line)
        @failed += 1
        @stderr.puts("sluice produce: #{line}") if @failed <= SHOWN_FAILURES
        @stderr.puts("sluice produce: (further failures are only counted)") if @failed == SHOWN_FAILURES + 1
      end

      def progress_line = @stderr.puts("sluice produce: #{@sent} sent, #{@delivered} delivered, #{@failed} failed (#{rate} msg/s)")

      def rate
        elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - @started
        elapsed.positive? ? (@sent / elapsed).round : 0
      end
    end
  end
end
