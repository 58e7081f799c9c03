# frozen_string_literal: true

module Sluice
  module CLI
    # Deliveries' counterpart for produce's plain lines (each line the whole
    # message), sent with Producer#produce_lines: no handle a message to
    # wait for, the producer counts the reports and hands over those that
    # were no delivery, with their line numbers (Producer#line_reports).
    # Says the same as Deliveries: progress lines, the first failures, the
    # summary, and where an interrupted run resumes.
    class LineDeliveries
      # Messages counted so far: sent, delivered, failed.
      attr_reader :sent, :delivered, :failed
      # Numbers of the empty input lines (no message): Producer#produce_lines adds to it.
      attr_reader :empty_lines

      # @param progress [Integer] messages between progress lines (0: none)
      # @param wait_ms [Integer] how long the last report is waited for
      def initialize(stderr, progress:, wait_ms:)
        @stderr = stderr
        @progress = progress
        @next_progress = progress.positive? ? progress : nil
        @wait_ms = wait_ms
        @sent = @delivered = @failed = @unknown = 0
        @missing = [] # line numbers of the messages not delivered
        @empty_lines = []
        @started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      end

      # @param count [Integer, nil] -c: messages to send in all
      # @return [Integer] messages that may go before the next progress line (or the count)
      def room(count) = [@next_progress, count].compact.map { |limit| limit - @sent }.min || Producer::Enqueuer::UNLIMITED_LINES

      # Counts messages sent; a progress line when they reach the next.
      def add(messages, producer)
        @sent += messages
        progress_line(producer) if @sent == @next_progress
      end

      # A line librdkafka refused (nothing was sent).
      def refused(line, error, producer)
        failure("line #{line}: #{Errors::ProduceError.new(error).message}", line)
        add(1, producer)
      end

      # Waits (up to wait_ms) until every message sent has its report.
      def finish(producer)
        deadline = now + (@wait_ms / 1000.0)
        until take(producer) >= @sent
          return lost(@sent - take(producer)) if now >= deadline

          producer.flush([((deadline - now) * 1000).ceil, 1].max) || Thread.pass
        end
      end

      # Counts what is reported without waiting: the rest is not known.
      def finish_now(producer)
        @unknown += @sent - take(producer)
      end

      # (see Deliveries#summary)
      def summary(topic)
        ProduceReport.summary(topic, counts, rate)
      end

      # (see Deliveries#interrupted_summary)
      def interrupted_summary(topic, signal, lines)
        resume = @missing.min || (lines + 1)
        ProduceReport.interrupted(topic, signal, lines, counts, resume: resume, again: @delivered - sent_before(resume))
      end

      def failed? = @failed.positive?

      private

      # Takes the producer's reports; returns the messages accounted for.
      def take(producer)
        @delivered, missed = producer.line_reports
        missed.each { |line, error| missed(line, error) }
        @delivered + @failed + @unknown
      end

      def missed(line, error)
        return failure("delivery failed: #{error.message}", line) unless Deliveries::PURGED.include?(error.code)

        @unknown += 1
        @missing << line
      end

      # Messages whose report never came within wait_ms (their lines are not known).
      def lost(count)
        count.times { failure("no delivery report within #{@wait_ms} ms", nil) }
      end

      # Every line before the first missing one is delivered, or was empty.
      def sent_before(line) = line - 1 - @empty_lines.count { |empty| empty < line }

      def failure(text, line)
        @missing << line if line
        @failed += 1
        @stderr.puts("sluice produce: #{text}") if @failed <= Deliveries::SHOWN_FAILURES
        @stderr.puts("sluice produce: (further failures are only counted)") if @failed == Deliveries::SHOWN_FAILURES + 1
      end

      def progress_line(producer)
        take(producer)
        @stderr.puts(ProduceReport.progress(counts, rate))
        @next_progress += @progress
      end

      def rate = ProduceReport.rate(@sent, @started)

      def counts = { sent: @sent, delivered: @delivered, failed: @failed, unknown: @unknown }

      def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end
