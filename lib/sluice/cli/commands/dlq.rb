# frozen_string_literal: true

module Sluice
  module CLI
    module Commands
      # sluice dlq tail|replay TOPIC: a dead-letter topic's messages
      # (each_message(dead_letter:)) shown with their origin and error, or
      # produced back (Sluice::DeadLetterQueue).
      class Dlq < Command
        # What `sluice` and `sluice help` say of the command.
        SUMMARY = "a dead-letter topic: tail shows each message's origin and error, replay produces them back"
        # (see Command::ARGUMENTS)
        ARGUMENTS = "tail|replay TOPIC"
        # The actions it takes.
        ACTIONS = %w[tail replay].freeze

        # --to, --where, -G (replay).
        def define(parser)
          @where = {}
          parser.on("--to TOPIC", "replay: produce to TOPIC, partitioned by key (default: each message's source topic and partition)") do |topic|
            @to = topic
          end
          parser.on("--where NAME=VALUE", "replay: only messages whose header NAME (or key) is VALUE (repeatable: all must match)") do |pair|
            name, value = pair.split("=", 2)
            raise UsageError, "--where takes NAME=VALUE, got #{pair.inspect}" if value.nil? || name.empty?

            @where[name] = value
          end
          parser.on("-G", "--group GROUP", "replay: the group whose committed offsets are the position (default sluice-dlq-replay-TOPIC)") do |group|
            @group = group
          end
        end

        # @return [nil]
        def run(action, topic)
          raise UsageError, "dlq takes tail or replay, got #{action.inspect}" unless ACTIONS.include?(action)

          queue = DeadLetterQueue.new(topic, kafka: kafka, logger: logger)
          action == "tail" ? tail(queue) : replay(queue, topic)
          nil
        end

        private

        def tail(queue)
          count = queue.each { |letter| out(letter.to_s) }
          warn_line("#{count} dead letter(s)")
        end

        def replay(queue, topic)
          count = queue.replay(to_topic: @to, where: (@where unless @where.empty?), group: @group || "sluice-dlq-replay-#{topic}")
          warn_line("#{count} dead letter(s) produced #{@to ? "to #{@to}" : "back to their source topics"}")
        end
      end
    end
  end
end
