# frozen_string_literal: true

module Sluice
  # A consumed message. A Struct the native consumer defines and fills field
  # by field (ext/sluice/consume.c fixes the field order): one object per
  # message, key and payload binary-exact (ASCII-8BIT), the topic name shared
  # by every message of the topic. Headers become a Hash only when asked for.
  # Read-only: the fields have no public writers. Two messages are equal when
  # their fields are (Struct#==); they match hash patterns (`in {topic:, offset:}`).
  #
  # A message, not a collection: the Struct's collection methods (each, size,
  # to_a, Enumerable's) are undefined, so `Array(message)` is `[message]` and
  # code taking "a message or a batch" tells them apart (`respond_to?(:each)`).
  # (`Enumerable === message` stays true: a Struct's ancestry cannot change.)
  class Message
    # The fields, defined natively (raw_headers, private, is the headers as a
    # flat [name, value, ...] Array, or nil):
    # @!attribute [r] topic
    #   @return [String]
    # @!attribute [r] partition
    #   @return [Integer]
    # @!attribute [r] offset
    #   @return [Integer]
    # @!attribute [r] key
    #   @return [String, nil] binary (ASCII-8BIT)
    # @!attribute [r] payload
    #   @return [String, nil] binary (ASCII-8BIT); nil for a tombstone
    # @!attribute [r] timestamp_ms
    #   @return [Integer, nil] milliseconds since the epoch, as Kafka stores it

    # (Two statements, not one private(*writers, ...): YARD cannot read a splat.)
    members.each { |name| private(:"#{name}=") }
    private :[]=, :raw_headers

    COLLECTION_METHODS = (Enumerable.instance_methods + %i[each each_pair size length values to_a deconstruct select filter
                                                           values_at dig [] []=]).uniq - members - %i[to_h]
    undef_method(*COLLECTION_METHODS.select { |name| method_defined?(name) || private_method_defined?(name) })
    private_constant :COLLECTION_METHODS

    # @return [Hash{String => String, Array<String>}] a name given more than
    #   once maps to its values in order; a header without value maps to nil
    def headers
      @headers ||= (raw_headers || []).each_slice(2).each_with_object({}) do |(name, value), hash|
        hash[name] = hash.key?(name) ? [*hash[name], value] : value
      end.freeze
    end

    # @return [Array<Array(String, String)>] every header in order, as sent
    def header_pairs = (raw_headers || []).each_slice(2).to_a

    # @return [Time, nil] the message's timestamp (CreateTime or LogAppendTime)
    def timestamp = timestamp_ms && Time.at(timestamp_ms / 1000, timestamp_ms % 1000, :millisecond)

    # A tombstone (a key with no payload: the key's deletion in a compacted topic)?
    def tombstone? = payload.nil?

    # @return [Hash] topic:, partition:, offset:, key:, payload:, headers:, timestamp: (a Time)
    def to_h = { topic: topic, partition: partition, offset: offset, key: key, payload: payload, headers: headers, timestamp: timestamp }

    # A short line without the payload (it may be large, binary or confidential).
    # @return [String] e.g. `#<Sluice::Message orders/0@42 key="k" 5 bytes>`
    def inspect
      shown_key = " key=#{key.inspect}" if key
      "#<#{self.class.name} #{topic}/#{partition}@#{offset}#{shown_key} #{payload ? "#{payload.bytesize} bytes" : "tombstone"}>"
    end
    alias to_s inspect

    # pp, IRB, the Rails console and error trackers show the same short line,
    # never the payload (it may be large, binary or confidential).
    # @param printer [PP]
    # @return [void]
    def pretty_print(printer) = printer.text(inspect)
  end
end
