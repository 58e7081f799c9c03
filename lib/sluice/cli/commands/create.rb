# frozen_string_literal: true

module Sluice
  module CLI
    module Commands
      # sluice create TOPIC: a new topic, returned once the brokers show it
      # (kafka-topics.sh --create).
      class Create < Command
        # What `sluice` and `sluice help` say of the command.
        SUMMARY = "create a topic"
        # (see Command::ARGUMENTS)
        ARGUMENTS = "TOPIC"

        # --partitions, --replication-factor, --config, --if-not-exists.
        def define(parser)
          @partitions = 1
          @replication_factor = 1
          @config = {}
          parser.on("--partitions N", "partitions (default 1)") { |n| @partitions = positive_integer(n, "--partitions") }
          parser.on("--replication-factor N", "replicas of each partition (default 1)") do |n|
            @replication_factor = positive_integer(n, "--replication-factor")
          end
          parser.on("--config KEY=VALUE", "a topic setting, e.g. cleanup.policy=compact (repeatable)") { |pair| setting(pair) }
          parser.on("--if-not-exists", "an existing topic is not an error") { @if_not_exists = true }
        end

        # @return [nil]
        def run(topic)
          with_admin { |admin| admin.create_topic(topic, partitions: @partitions, replication_factor: @replication_factor, config: @config) }
          out("created topic #{topic}: #{@partitions} partition(s), replication factor #{@replication_factor}")
        rescue Errors::TopicAlreadyExistsError
          raise unless @if_not_exists

          out("topic #{topic} exists")
        end

        private

        def setting(pair)
          name, value = pair.split("=", 2)
          raise UsageError, "--config takes KEY=VALUE, got #{pair.inspect}" if value.nil? || name.empty?

          @config[name] = value
        end
      end
    end
  end
end
