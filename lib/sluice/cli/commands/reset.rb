# frozen_string_literal: true

module Sluice
  module CLI
    module Commands
      # sluice reset GROUP TOPIC --to earliest|latest|TIME: moves the group's
      # committed offsets on the topic (kafka-consumer-groups.sh
      # --reset-offsets). Refused while the group has members: they would
      # commit over it.
      class Reset < Command
        # What `sluice` and `sluice help` say of the command.
        SUMMARY = "move a group's committed offsets on a topic (the group must have no active member)"
        # (see Command::ARGUMENTS)
        ARGUMENTS = "GROUP TOPIC"

        # --to, --dry-run.
        def define(parser)
          parser.on("--to TARGET", "earliest, latest, or a time (ISO 8601 or ms since the epoch)") { |target| @target = target(target) }
          parser.on("--dry-run", "print the plan, commit nothing") { @dry_run = true }
        end

        # @return [Integer, nil] FAILED when the group has members
        def run(group, topic)
          raise UsageError, "--to is required (earliest, latest or a time)" unless @target

          with_admin do |admin|
            members = active_members(admin, group)
            plan = plan(admin, topic)
            current = admin.committed_offsets(group).fetch(topic, {})
            return dry_run(group, topic, plan, current, members) if @dry_run
            return refuse(group, members) unless members.to_i.zero?

            admin.reset_offsets(group, topic, plan)
            print_plan("reset group #{group} on #{topic}:", topic, plan, current)
          end
        end

        private

        def target(text)
          return text.to_sym if %w[earliest latest].include?(text)

          TimeArgument.parse(text, "--to")
        end

        # { partition => offset }: computed here (not by reset_offsets) so a dry run shows exactly what a real one commits.
        def plan(admin, topic)
          partitions = admin.describe_topic(topic)[:partitions].map { |p| p[:partition] }
          return partitions.to_h { |p| [p, admin.watermark_offsets(topic, p).first] } if @target == :earliest
          return partitions.to_h { |p| [p, admin.watermark_offsets(topic, p).last] } if @target == :latest

          found = admin.offsets_for_time(topic, @target)
          partitions.to_h { |p| [p, found.fetch(p, -1).negative? ? admin.watermark_offsets(topic, p).last : found[p]] }
        end

        # @return [Integer, nil] nil for no group the admin API knows: one that never
        #   existed (it may be given offsets), or a share group's id (librdkafka
        #   describes none; a reset of it is refused)
        def active_members(admin, group)
          admin.describe_group(group)[:members].size
        rescue Errors::UnknownGroupError
          nil
        end

        def refuse(group, members)
          warn_line("sluice reset: group #{group} has #{members} active member(s): stop its consumers first (nothing was changed)")
          FAILED
        end

        def dry_run(group, topic, plan, current, members)
          print_plan("plan for group #{group} on #{topic} (dry run, nothing committed):", topic, plan, current)
          if members.nil?
            warn_line("sluice reset: no consumer group #{group} is known: a real reset gives it these offsets, " \
                      "or is refused if #{group} is a share group's id (librdkafka cannot tell them apart)")
          elsif members.positive?
            warn_line("sluice reset: group #{group} has #{members} active member(s): a real reset would be refused")
          end
          nil
        end

        def print_plan(title, topic, plan, current)
          out(title)
          rows = plan.sort.map { |partition, offset| [topic, partition, current.fetch(partition, "-"), offset] }
          Table.lines(%w[TOPIC PARTITION CURRENT NEW], rows).each { |line| out(line) }
        end
      end
    end
  end
end
