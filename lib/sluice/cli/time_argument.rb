# frozen_string_literal: true

module Sluice
  module CLI
    # A point in time on the command line: ISO 8601 (2026-05-01T12:00:00Z) or
    # milliseconds since the epoch (Kafka's timestamps, kcat's s@).
    module TimeArgument
      module_function

      # @raise [UsageError]
      def parse(text, flag)
        return Time.at(Integer(text, 10) / 1000r) if text.match?(/\A\d+\z/)

        Time.iso8601(text)
      rescue ArgumentError
        raise UsageError, "#{flag} takes an ISO 8601 time (2026-05-01T12:00:00Z) or milliseconds since the epoch, got #{text.inspect}"
      end
    end
  end
end
