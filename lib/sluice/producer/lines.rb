# frozen_string_literal: true

module Sluice
  class Producer
    # Delimited text sent as it is, a message per record: the records of a
    # String go to librdkafka in one native call, with no Ruby object a
    # message (no Hash, no String, no DeliveryHandle), and their reports are
    # counted natively instead of resolved on handles (#line_reports). What
    # `sluice produce` uses when a line is the whole message (issue 58): a
    # million lines cost librdkafka's time, not a million objects'.
    # Messages sent this way are not instrumented one by one and take no
    # middleware; #flush and #close wait for them as for any other.
    module Lines
      # Up to this many messages a call when no max is given.
      UNLIMITED = 2**62

      # Sends data's records from offset, each (its delimiter taken off) the
      # value of a message to topic, numbered from line. An empty record is no
      # message: its number goes to empties. A full local queue is waited out
      # as #produce_async's is (config.wait_on_queue_full).
      # @api private
      # @param topic [String]
      # @param data [String] records, each ended by delimiter (the last may lack it)
      # @param delimiter [String] not empty
      # @param offset [Integer] where in data to start
      # @param line [Integer] the number of the record at offset
      # @param partition [Integer] -1: the partitioner's choice
      # @param max [Integer, nil] at most this many messages
      # @param empties [Array<Integer>] gets the numbers of the empty records
      # @return [Array(Integer, Integer, Integer, KafkaError, nil)] the offset and number of the record
      #   where it stopped, the messages sent, and why librdkafka refused that record (nil: none was)
      # @raise [Errors::ProducerClosedError]
      def produce_lines(topic, data, delimiter:, offset: 0, line: 1, partition: -1, max: nil, empties: [])
        ensure_open!
        client = @client
        sent = 0
        deadline = now + (@config.wait_timeout_on_queue_full / 1000.0)
        loop do
          offset, line, count, code = client.produce_lines(topic.to_s, data, offset, delimiter, partition, line,
                                                           max ? max - sent : UNLIMITED, empties, Variant.current(self)&.topic_config_id)
          sent += count
          return [offset, line, sent, code && error_for(client, code)] unless full_queue_wait?(code, deadline)

          make_room
        end
      end

      # What became of the messages #produce_lines sent.
      # @api private
      # @return [Array(Integer, Array<Array(Integer, KafkaError)>)] how many were delivered so
      #   far, and each that was not since the last call: its line number and why
      def line_reports
        delivered, missed = @client.line_reports
        [delivered, missed.each_slice(2).map { |line, code| [line, KafkaError.new(code)] }]
      end

      private

      def full_queue_wait?(code, deadline) = code == QUEUE_FULL && @config.wait_on_queue_full && now < deadline
    end
  end
end
