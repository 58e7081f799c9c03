# frozen_string_literal: true

module Sluice
  module CLI
    # How tail prints a message, as kcat does:
    # - `value` (the default): the value, with -K DELIM the key and DELIM
    #   before it, then -D's delimiter (a newline by default);
    # - `json`: one JSON object a line;
    # - a format string with kcat's tokens (-f 'Topic %t [%p] at offset %o: key %k: %s\n'),
    #   printed as it is: no delimiter is added.
    # With -Z a NULL key or value prints as NULL instead of nothing.
    class MessageFormat
      # What -f takes besides a format string.
      FORMATS = %w[value json].freeze
      # kcat's -f tokens and the field each prints.
      TOKENS = {
        "s" => :value, "S" => :value_size, "R" => :value_size_binary, "k" => :key, "K" => :key_size,
        "T" => :timestamp, "h" => :headers, "t" => :topic, "p" => :partition, "o" => :offset, "%" => :percent
      }.freeze
      # What -Z prints for a NULL key or value (kcat's "NULL").
      NULL = "NULL"

      # @param format [String] value, json, or a format string (one with a % token or a \ escape)
      # @param key_delimiter [String, nil] -K: the value format prints the key and it before the value
      # @param delimiter [String] -D: what follows each message in the value and json formats
      # @param null [Boolean] -Z: a NULL key or value prints as NULL
      # @raise [UsageError] an unknown format or token
      def initialize(format, key_delimiter: nil, delimiter: "\n", null: false)
        @key_delimiter = key_delimiter && Escapes.parse(key_delimiter)
        @delimiter = Escapes.parse(delimiter)
        @null = null ? NULL : "".b
        @parts = template(format) if format.match?(/[%\\]/)
        unless @parts || FORMATS.include?(format)
          raise UsageError,
                "-f takes #{FORMATS.join(", ")} or a format string with kcat's %tokens, got #{format.inspect}"
        end

        @json = format == "json"
      end

      # The format as Consumer#render_batches' ops (librdkafka's messages
      # formatted natively, no Message each); nil for what only Ruby prints
      # (json, %h).
      # @return [Array<String, Symbol>, nil]
      def native_ops
        return if @json
        return [*([:key, @key_delimiter] if @key_delimiter), :value, @delimiter] unless @parts
        return if @parts.include?(:headers)

        @parts.map { |part| part == :percent ? "%" : part }
      end

      # @return [String] what a NULL key or value prints ("NULL" with -Z, else nothing)
      attr_reader :null

      # What is printed for a batch of messages, as one String (one write a
      # batch: the value format appends each message's bytes, no copy of each).
      # @param messages [Array<Message>]
      # @return [String] binary
      def render_all(messages)
        return messages.map { |message| render(message) }.join.b if @parts || @json

        messages.each_with_object("".b) do |message, out|
          out << (message.key || @null) << @key_delimiter if @key_delimiter
          out << (message.payload || @null) << @delimiter
        end
      end

      # @param message [Message]
      # @return [String] what is printed for the message (binary), delimiter included
      def render(message)
        return @parts.map { |part| part.is_a?(Symbol) ? field(part, message) : part }.join.b if @parts
        return JSON.generate(json(message)).b << @delimiter if @json

        value = bytes(message.payload)
        (@key_delimiter ? bytes(message.key) + @key_delimiter + value : value) << @delimiter
      end

      private

      # The format string as literal byte strings and token symbols.
      def template(format)
        format.b.split(/(%.?)/m).reject(&:empty?).map do |piece|
          next Escapes.parse(piece) unless piece.start_with?("%")

          TOKENS.fetch(piece[1..]) do
            raise UsageError, "-f: unknown token #{piece.inspect} (kcat's tokens: #{TOKENS.keys.map do |t|
                                                                                      "%#{t}"
                                                                                    end.join(" ")})"
          end
        end
      end

      def field(name, message)
        case name
        when :value then bytes(message.payload)
        when :key then bytes(message.key)
        when :value_size then size(message.payload).to_s
        when :key_size then size(message.key).to_s
        when :value_size_binary then [size(message.payload)].pack("l>")
        when :timestamp then message.timestamp_ms.to_s
        when :headers then headers(message.headers)
        when :percent then "%"
        else message.public_send(name).to_s
        end
      end

      def bytes(text) = text.nil? ? @null.dup : text.b

      def size(text) = text.nil? ? -1 : text.bytesize

      # kcat's %h: name=value pairs joined by commas, a NULL value as NULL.
      def headers(headers)
        headers.flat_map { |name, value| Array(value.nil? ? [nil] : value).map { |v| "#{name}=#{v.nil? ? NULL : v}".b } }.join(",")
      end

      def json(message)
        fields = { topic: message.topic, partition: message.partition, offset: message.offset, timestamp: message.timestamp_ms }
        text(fields, :key, message.key)
        fields[:headers] = message.headers.transform_values { |value| value.is_a?(Array) ? value.map { |v| scrubbed(v) } : scrubbed(value) }
        text(fields, :value, message.payload)
        fields
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
