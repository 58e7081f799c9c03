# frozen_string_literal: true

module Sluice
  class Consumer
    module Failure
      # retry_topics: [5, 60, 600]: where a failed message goes next. Each
      # source topic T has retry topics "T.retry.5s", "T.retry.60s", ...; a
      # message that failed on T goes to the first, one that failed on a
      # retry topic to the next, and after the last to the dead-letter topic.
      # The message carries when it is due (DUE, ms since the epoch) and its
      # origin (DeadLetters' source_* headers, kept from the first hop on), so
      # a dead letter names the message as it first was.
      # @api private
      class RetryTopics
        # The header of a message in a retry topic: when it is due (ms since the epoch).
        DUE = "retry_due"

        # @return [Array<Numeric>] the delays (s)
        attr_reader :delays

        # The retry topic of topic for a delay: "orders.retry.5s" (0.5 s: "orders.retry.0.5s").
        # @return [String]
        def self.name(topic, delay) = "#{topic}#{suffix(delay)}"

        # The part after the source topic's name: ".retry.5s".
        # @return [String]
        def self.suffix(delay) = ".retry.#{delay == delay.to_i ? delay.to_i : delay}s"

        # @param delays [Array<Numeric>] ascending seconds (Settings.retry_topics)
        def initialize(delays)
          @delays = delays
          @suffixes = delays.map { |delay| RetryTopics.suffix(delay) }
        end

        # @return [Array<String>] the retry topics of a source topic, in order
        def names(topic) = @delays.map { |delay| RetryTopics.name(topic, delay) }

        # @return [Boolean] topic is one of the retry topics (of any source)
        def retry_topic?(topic) = !step(topic).nil?

        # Where a message that failed on topic goes next.
        # @return [Array(String, Numeric), nil] the retry topic and its delay (s); nil: the dead-letter topic
        def next_hop(topic)
          step = step(topic)
          following = step ? step + 1 : 0
          return if following >= @delays.size

          source = step ? topic.delete_suffix(@suffixes[step]) : topic
          [RetryTopics.name(source, @delays[following]), @delays[following]]
        end

        # @return [Float, nil] the wall-clock time (s since the epoch) a
        #   message of a retry topic is due at; nil for any other message
        def due_at(message)
          return unless retry_topic?(message.topic)

          (due = message.headers[DUE]) && (due.to_i / 1000.0)
        end

        # Block runs before this message's hop (its source_attempts header on a retry topic).
        # @return [Integer]
        def runs_before(message) = retry_topic?(message.topic) ? message.headers["source_attempts"].to_i : 0

        private

        # The retry topic's place among the delays, nil for a source topic.
        def step(topic) = @suffixes.index { |suffix| topic.end_with?(suffix) && topic.size > suffix.size }
      end
    end
  end
end
