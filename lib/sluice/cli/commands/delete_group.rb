# frozen_string_literal: true

module Sluice
  module CLI
    module Commands
      # sluice delete-group GROUP: deletes a consumer group or a share group,
      # with what it committed or its start offsets (kafka-consumer-groups.sh
      # and kafka-share-groups.sh --delete). The broker refuses while the group
      # has members.
      class DeleteGroup < Command
        # What `sluice` and `sluice help` say of the command.
        SUMMARY = "delete a consumer or share group and its offsets (the group must have no active member)"
        # (see Command::ARGUMENTS)
        ARGUMENTS = "GROUP"

        # @return [nil]
        def run(group)
          with_admin { |admin| admin.delete_group(group) }
          out("deleted group #{group}")
        end
      end
    end
  end
end
