# frozen_string_literal: true

module Sluice
  module CLI
    # kcat's backslash escapes in -D, -K and -f: \n, \r, \t, \xHH (a byte in
    # hex), \NNN (a byte in decimal, or octal with a leading 0); a backslash
    # before any other character stands for that character (\\ is one
    # backslash).
    module Escapes
      # The escapes that stand for a control character.
      SIMPLE = { "n" => "\n", "r" => "\r", "t" => "\t" }.freeze
      # An escape: \xHH, \NNN, or a backslash and any character.
      PATTERN = /\\(?:x(\h{1,2})|(\d{1,3})|(.))/m

      module_function

      # @param text [String] as typed
      # @return [String] the bytes it stands for (binary)
      def parse(text)
        text.b.gsub(PATTERN) do
          hex, number, char = Regexp.last_match.captures
          if hex then hex.to_i(16).chr
          elsif number then byte(number)
          else
            SIMPLE.fetch(char, char)
          end
        end
      end

      def byte(digits)
        value = digits.size > 1 && digits.start_with?("0") ? digits.to_i(8) : digits.to_i
        raise UsageError, "\\#{digits} is not a byte (0-255)" if value > 255

        value.chr
      end
    end
  end
end
