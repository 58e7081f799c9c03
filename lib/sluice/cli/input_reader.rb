# frozen_string_literal: true

module Sluice
  module CLI
    # produce's input, one delimited record at a time, such that a signal
    # never loses input. IO#gets, interrupted while it waits for the rest of
    # a line, drops the part it already took from its buffer; here input is
    # read without blocking and split into records with signals deferred,
    # and a signal lands only while waiting for input to be readable, or
    # between records (a record taken but not yet counted by the caller is
    # where a rerun resumes).
    class InputReader
      CHUNK = 64 * 1024

      # @param input [IO] binary
      # @param delimiter [String] what ends a record (binary, not empty)
      def initialize(input, delimiter)
        @io = input
        @delimiter = delimiter
        @records = [] # complete records read, oldest first
        @rest = "".b # the unfinished record after them
        @eof = false
      end

      # @return [String, nil] the next record with its delimiter (the last may
      #   lack it), nil at the end of the input
      def next_record
        while @records.empty?
          return nil if @eof

          @io.wait_readable unless Thread.handle_interrupt(Object => :never) { fill } # a signal may land in the wait
        end
        @records.shift
      end

      private

      # Reads what is there without blocking and splits it into records.
      # @return [Boolean] false when nothing was there
      def fill
        chunk = @io.read_nonblock(CHUNK, exception: false)
        return false if chunk == :wait_readable

        if chunk.nil?
          @eof = true
          @records << @rest unless @rest.empty?
        else
          (@rest << chunk).each_line(@delimiter) { |record| @records << record }
          @rest = @records.last.end_with?(@delimiter) ? "".b : @records.pop
        end
        true
      end
    end
  end
end
