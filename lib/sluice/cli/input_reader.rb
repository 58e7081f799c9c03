# frozen_string_literal: true

module Sluice
  module CLI
    # produce's input as delimited records, handed out as they become
    # readable: every complete record read so far at once (so that producing
    # them costs one deferred step, not one a line), without waiting for more
    # when some are there (a person typing lines sees each sent).
    class InputReader
      CHUNK = 64 * 1024 # bytes read at a time

      # @param input [IO] binary
      # @param delimiter [String] what ends a record (binary, not empty)
      def initialize(input, delimiter)
        @io = input
        @delimiter = delimiter
        @rest = "".b # an unfinished record
        @eof = false
      end

      # @return [Array<String>, nil] the next records, each with its delimiter
      #   (the input's last may lack it); nil at the end of the input
      def next_records
        until @eof
          chunk = @io.read_nonblock(CHUNK, exception: false)
          next @io.wait_readable if chunk == :wait_readable
          return finish if chunk.nil?

          records = (@rest << chunk).each_line(@delimiter).to_a
          @rest = records.last.end_with?(@delimiter) ? "".b : records.pop
          return records unless records.empty?
        end
      end

      # @return [String, nil] the next whole records as one String, delimiters
      #   kept (at the end, the input's last record, which may lack it); nil at
      #   the end of the input. No String a record: produce's plain lines go
      #   to librdkafka from it (Producer#produce_lines).
      def next_chunk
        until @eof
          chunk = @io.read_nonblock(CHUNK, exception: false)
          next @io.wait_readable if chunk == :wait_readable
          return finish_chunk if chunk.nil?

          @rest << chunk
          last = @rest.rindex(@delimiter) or next
          return whole_records(last + @delimiter.bytesize)
        end
      end

      private

      def whole_records(size)
        records = @rest
        @rest = records.byteslice(size, records.bytesize - size)
        records.bytesize == size ? records : records.byteslice(0, size)
      end

      def finish_chunk
        @eof = true
        @rest.empty? ? nil : @rest
      end

      def finish
        @eof = true
        @rest.empty? ? nil : [@rest]
      end
    end
  end
end
