# frozen_string_literal: true

module Sluice
  module CLI
    module Commands
      # sluice describe TOPIC: its partitions with leader, replicas and
      # in-sync replicas (kafka-topics.sh --describe; kcat -L -t).
      class Describe < Command
        # What `sluice` and `sluice help` say of the command.
        SUMMARY = "show a topic's partitions: leader, replicas, in-sync replicas"
        # (see Command::ARGUMENTS)
        ARGUMENTS = "TOPIC"

        # -J (JSON).
        def define(parser)
          parser.on("-J", "--json", "one JSON object instead of a table") { @json = true }
        end

        # @return [nil]
        def run(topic)
          description = with_admin { |admin| admin.describe_topic(topic) }
          return out(JSON.generate(description)) if @json

          out("topic #{description[:name]}: #{description[:partitions].size} partition(s)")
          rows = description[:partitions].map { |p| [p[:partition], p[:leader], p[:replicas].join(","), p[:isr].join(",")] }
          Table.lines(%w[PARTITION LEADER REPLICAS ISR], rows).each { |line| out(line) }
        end
      end
    end
  end
end
