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

      private

      def finish
        @eof = true
        @rest.empty? ? nil : [@rest]
      end
    end
  end
end
