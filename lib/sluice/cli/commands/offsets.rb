# frozen_string_literal: true

module Sluice
  module CLI
    module Commands
      # sluice offsets TOPIC:PARTITION:TIME...: the first offset at or after
      # each time (kcat -Q), printed as kcat prints it.
      class Offsets < Command
        # What `sluice` and `sluice help` say of the command.
        SUMMARY = "the first offset at or after a time, per partition (kcat -Q)"
        # (see Command::ARGUMENTS)
        ARGUMENTS = "TOPIC:PARTITION:TIME..."

        # Prints `TOPIC [PARTITION] offset OFFSET` a line, sorted (kcat's
        # lines); -1 where no message is at or after the time.
        # @return [nil]
        def run(*queries)
          wanted = queries.map { |query| parse(query) }
          found = with_admin { |admin| lookups(admin, wanted) }
          wanted.sort_by { |topic, partition, _| [topic, partition] }.each do |topic, partition, time|
            out("#{topic} [#{partition}] offset #{found.fetch([topic, time]).fetch(partition, -1)}")
          end
          nil
        end

        private

        def arguments(args)
          raise UsageError, "missing TOPIC:PARTITION:TIME" if args.empty?

          args
        end

        # One lookup per topic and time, however many partitions ask for it.
        def lookups(admin, wanted)
          wanted.map { |topic, _, time| [topic, time] }.uniq.to_h { |key| [key, admin.offsets_for_time(*key)] }
        end

        def parse(query)
          topic, partition, time = query.split(":", 3)
          if time.nil? || topic.empty?
            raise UsageError,
                  "offsets takes TOPIC:PARTITION:TIME (TIME: ms since the epoch or ISO 8601), got #{query.inspect}"
          end

          [topic, partition(partition), TimeArgument.parse(time, "TIME")]
        end
      end
    end
  end
end
