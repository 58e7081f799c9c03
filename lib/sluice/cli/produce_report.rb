# frozen_string_literal: true

module Sluice
  module CLI
    # The lines `sluice produce` writes about its deliveries to stderr,
    # whichever way they were counted (Deliveries: a handle a message;
    # LineDeliveries: plain lines counted natively): one wording for both.
    module ProduceReport
      module_function

      # @param counts [Hash] :sent, :delivered, :failed
      # @return [String] a progress line
      def progress(counts, rate) = "sluice produce: #{counts[:sent]} sent, #{counts[:delivered]} delivered, #{counts[:failed]} failed (#{rate} msg/s)"

      # @return [String] the line printed at the end: delivered, sent, failed, rate
      def summary(topic, counts, rate)
        "sluice produce: #{counts[:delivered]} of #{counts[:sent]} message(s) delivered to #{topic}, #{counts[:failed]} failed (#{rate} msg/s)"
      end

      # @param counts [Hash] :sent, :delivered, :failed, :unknown
      # @param resume [Integer] the input line a rerun starts from
      # @param again [Integer] messages after it that were delivered (a rerun sends them again)
      # @return [Array<String>] the summary of an interrupted run: counts and where a rerun resumes
      def interrupted(topic, signal, lines, counts, resume:, again:)
        after = again.positive? ? "; #{again} message(s) after it were delivered and would be sent again" : ""
        ["sluice produce: interrupted by SIG#{signal} after input line #{lines}: #{counts[:delivered]} of #{counts[:sent]} " \
         "message(s) delivered to #{topic}, #{counts[:failed]} failed, #{counts[:unknown]} not known (no delivery report: may be written)",
         "sluice produce: to resume, rerun with the input from line #{resume} (tail -n +#{resume})#{after}"]
      end

      # @return [Integer] messages a second since started (a monotonic clock's reading)
      def rate(sent, started)
        elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
        elapsed.positive? ? (sent / elapsed).round : 0
      end
    end
  end
end
