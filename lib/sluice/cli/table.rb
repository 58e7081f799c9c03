# frozen_string_literal: true

module Sluice
  module CLI
    # Rows in aligned columns, the header first: what a person reads and
    # `awk '{print $5}'` takes apart.
    module Table
      module_function

      # @param header [Array<String>]
      # @param rows [Array<Array>]
      # @return [Array<String>] the header and the rows, columns padded to line up
      def lines(header, rows)
        all = [header, *rows].map { |row| row.map(&:to_s) }
        widths = header.each_index.map { |i| all.map { |row| row[i].size }.max }
        all.map { |row| row.each_with_index.map { |cell, i| cell.ljust(widths[i]) }.join("  ").rstrip }
      end
    end
  end
end
