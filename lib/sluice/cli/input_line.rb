# frozen_string_literal: true

module Sluice
  module CLI
    # One line of produce's input as a message: the line is the value (with
    # -K DELIM, what comes before the first DELIM is the key; -k KEY, the key
    # of a line that names none), or with --json an object {"key":,
    # "value":, "headers": {}, "partition":} (a null value is a tombstone).
    # As kcat: the line's bytes as read, only the delimiter ("\n", or -D's)
    # taken off (a "\r" before a "\n" stays); an empty line is no message;
    # with -Z an empty key or value after -K's split is sent as NULL.
    class InputLine
      # The fields a --json line may have.
      JSON_FIELDS = %w[key value headers partition].freeze

      # @param headers [Hash] -H pairs, for every message
      # @param partition [Integer, nil] -p
      # @param null [Boolean] -Z: an empty key or value (around -K's delimiter) is NULL
      # @param key [String, nil] -k: the key of a line that does not name one
      # @param delimiter [String] -D: what ends a line (taken off)
      def initialize(topic:, json: false, key_delimiter: nil, headers: {}, partition: nil, null: false, key: nil, delimiter: "\n")
        @null = null
        @key = key
        @delimiter = delimiter
        @topic = topic
        @json = json
        @key_delimiter = key_delimiter
        @headers = headers
        @partition = partition
        @plain = !json && !key_delimiter && headers.empty? && !partition && !key # the line is the value, nothing else
      end

      # @return [Hash, nil] a message for Producer#produce_async; nil for an empty line (skipped, as kcat does)
      # @raise [ArgumentError] a --json line that is not a message object
      def message(line)
        line = line.delete_suffix(@delimiter)
        return if line.empty?
        return { topic: @topic, payload: line } if @plain

        fields = @json ? parsed(line) : split(line)
        message = { topic: @topic, payload: fields[:value] }
        key = fields[:key] || @key # as kcat: -k is the key of a message that has none (-Z's NULL key too)
        message[:key] = key if key
        headers = @headers.merge(fields[:headers] || {})
        message[:headers] = headers unless headers.empty?
        partition = fields.key?(:partition) ? fields[:partition] : @partition
        message[:partition] = partition if partition
        message
      end

      private

      def split(line)
        return { value: line } unless @key_delimiter

        key, value = line.split(@key_delimiter, 2)
        return { value: line } unless value
        return { key: key, value: value } unless @null

        { key: key.empty? ? nil : key, value: value.empty? ? nil : value }
      end

      def parsed(line)
        object = JSON.parse(line.dup.force_encoding(Encoding::UTF_8))
        raise ArgumentError, "not a JSON object: #{line[0, 80]}" unless object.is_a?(Hash)

        extra = object.keys - JSON_FIELDS
        raise ArgumentError, "unknown field(s) #{extra.join(", ")} (known: #{JSON_FIELDS.join(", ")})" unless extra.empty?

        checked(object)
      rescue JSON::ParserError => e
        raise ArgumentError, "invalid JSON: #{e.message[0, 120]}"
      end

      def checked(object)
        fields = object.transform_keys(&:to_sym)
        fields[:key] = string(fields[:key], "key") if fields.key?(:key)
        fields[:value] = string(fields[:value], "value") if fields.key?(:value)
        headers = fields[:headers]
        raise ArgumentError, "headers must be an object of strings" unless headers.nil? || (headers.is_a?(Hash) && headers.values.all?(String))

        partition = fields[:partition]
        raise ArgumentError, "partition must be an integer >= 0" unless partition.nil? || (partition.is_a?(Integer) && !partition.negative?)

        fields
      end

      # JSON numbers and booleans are sent as their text; null stays nil.
      def string(value, name)
        return value if value.nil? || value.is_a?(String)
        raise ArgumentError, "#{name} must be a string, number or boolean" if value.is_a?(Hash) || value.is_a?(Array)

        value.to_s
      end
    end
  end
end
