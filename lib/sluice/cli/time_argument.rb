# frozen_string_literal: true

module Sluice
  module CLI
    # A point in time on the command line: ISO 8601 (2026-05-01T12:00:00Z) or
    # milliseconds since the epoch (Kafka's timestamps, kcat's s@).
    module TimeArgument
      # Kafka's timestamps: 64-bit milliseconds from the epoch on (Admin#offsets_for_time refuses others).
      LAST_MS = (2**63) - 1

      module_function

      # @raise [UsageError]
      def parse(text, flag)
        time = text.match?(/\A\d+\z/) ? Time.at(Integer(text, 10) / 1000r) : Time.iso8601(text)
        return time if (time.to_r * 1000).floor.between?(0, LAST_MS)

        raise UsageError, "#{flag} takes a time from 1970-01-01T00:00:00Z to #{LAST_MS} ms after it, got #{text.inspect}"
      rescue ArgumentError
        raise UsageError, "#{flag} takes an ISO 8601 time (2026-05-01T12:00:00Z) or milliseconds since the epoch, got #{text.inspect}"
      end
    end
  end
end
