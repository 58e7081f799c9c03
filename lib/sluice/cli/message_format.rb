# frozen_string_literal: true

module Sluice
  module CLI
    # How tail prints a message: its value (kcat's default; with -K DELIM,
    # key DELIM value), or one JSON object per line.
    class MessageFormat
      # What -f takes.
      FORMATS = %w[value json].freeze

      # @param key_delimiter [String, nil] -K: print the key before the value
      def initialize(format, key_delimiter)
        raise UsageError, "-f takes #{FORMATS.join(" or ")}, got #{format.inspect}" unless FORMATS.include?(format)

        @json = format == "json"
        @key_delimiter = key_delimiter
      end

      # @param message [Message]
      # @return [String] the message as printed, without the newline
      def line(message) = @json ? json(message) : value(message)

      private

      def value(message)
        payload = message.payload.to_s
        @key_delimiter ? "#{message.key}#{@key_delimiter}#{payload}" : payload
      end

      def json(message)
        fields = { topic: message.topic, partition: message.partition, offset: message.offset, timestamp: message.timestamp_ms }
        text(fields, :key, message.key)
        fields[:headers] = message.headers.transform_values { |value| value.is_a?(Array) ? value.map { |v| scrubbed(v) } : scrubbed(value) }
        text(fields, :value, message.payload)
        JSON.generate(fields)
      end

      # Header values are text by convention: one that is not shows U+FFFD where its bytes were.
      def scrubbed(bytes) = bytes&.dup&.force_encoding(Encoding::UTF_8)&.scrub

      # Bytes that are not UTF-8 cannot be a JSON string: they go as
      # <name>_base64 instead, so nothing is lost or mangled.
      def text(fields, name, bytes)
        utf8 = bytes&.dup&.force_encoding(Encoding::UTF_8)
        if utf8.nil? || utf8.valid_encoding?
          fields[name] = utf8
        else
          fields[:"#{name}_base64"] = [bytes].pack("m0") # base64, no line breaks
        end
      end
    end
  end
end
