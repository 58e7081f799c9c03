# frozen_string_literal: true

module Sluice
  module CLI
    # One class per subcommand (see Command).
    module Commands
      # sluice lag GROUP: per partition the group committed, the partition's
      # end and the difference, and the total (kafka-consumer-groups.sh --describe).
      class Lag < Command
        # What `sluice` and `sluice help` say of the command.
        SUMMARY = "a group's committed offset, end offset and lag per partition, and the total"
        # (see Command::ARGUMENTS)
        ARGUMENTS = "GROUP [TOPIC]"

        # -J (JSON).
        def define(parser)
          parser.on("-J", "--json", "one JSON object instead of a table") { @json = true }
        end

        # @return [nil]
        def run(group, topic = nil)
          rows = with_admin { |admin| rows(admin, group, topic) }
          total = rows.sum(&:last)
          return out(JSON.generate(group: group, partitions: rows.map { |row| json_row(row) }, total: total)) if @json

          Table.lines(%w[TOPIC PARTITION COMMITTED END LAG], rows).each { |line| out(line) }
          out("total lag #{total}")
        end

        private

        # [[topic, partition, committed, end, lag], ...] sorted; an unknown group raises UnknownGroupError.
        def rows(admin, group, topic)
          admin.describe_group(group)
          committed = admin.committed_offsets(group)
          committed = committed.slice(topic) if topic
          committed.sort.flat_map do |name, offsets|
            offsets.sort.map do |partition, offset|
              high = admin.watermark_offsets(name, partition).last
              [name, partition, offset, high, [high - offset, 0].max]
            end
          end
        end

        def json_row((topic, partition, committed, high, lag))
          { topic: topic, partition: partition, committed: committed, end: high, lag: lag }
        end
      end
    end
  end
end
