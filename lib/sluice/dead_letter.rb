# frozen_string_literal: true

module Sluice
  # A message of a dead-letter topic, read back: where it came from and why
  # it failed, from the headers each_message(dead_letter:) gives it (Karafka
  # Pro's source_* names, so its dead letters read the same).
  class DeadLetter
    # The headers that say where a dead letter came from and why: a replay leaves them out.
    ORIGIN_HEADERS = %w[source_topic source_partition source_offset source_consumer_group source_attempts error_class error_message].freeze

    # @return [Message] the dead letter as read from its topic
    attr_reader :message

    # @param message [Message] a message of a dead-letter topic
    def initialize(message)
      @message = message
    end

    # @return [String, nil] the topic the message failed in
    def source_topic = header("source_topic")

    # @return [Integer, nil] its partition there
    def source_partition = header("source_partition")&.then { |text| Integer(text, 10, exception: false) }

    # @return [Integer, nil] its offset there
    def source_offset = header("source_offset")&.then { |text| Integer(text, 10, exception: false) }

    # @return [String, nil] the consumer group that gave up on it
    def source_consumer_group = header("source_consumer_group")

    # @return [Integer, nil] how many times its block ran
    def attempts = header("source_attempts")&.then { |text| Integer(text, 10, exception: false) }

    # @return [String, nil] the last error's class
    def error_class = header("error_class")

    # @return [String, nil] the last error's message (secrets filtered)
    def error_message = header("error_message")

    # @return [Hash{String => String, Array<String>}] the message's own headers, without the origin ones
    def original_headers = @message.headers.reject { |name, _| ORIGIN_HEADERS.include?(name) }

    # What `sluice dlq tail` prints of it: one line.
    # @return [String]
    def to_s
      origin = source_topic ? "#{source_topic}/#{source_partition}@#{source_offset}" : "unknown origin"
      group = " group #{source_consumer_group}" if source_consumer_group
      error = error_class ? "#{error_class}: #{error_message}" : "no error recorded"
      "#{@message.topic}/#{@message.partition}@#{@message.offset} from #{origin}#{group}, " \
        "#{attempts || "?"} attempt(s), key #{@message.key.inspect}: #{error}"
    end

    private

    def header(name)
      value = @message.headers[name]
      value.is_a?(Array) ? value.last : value
    end
  end
end
