# frozen_string_literal: true

module Sluice
  module CLI
    module Commands
      # sluice groups: the consumer groups' ids, one a line (kafka-consumer-groups.sh --list).
      class Groups < Command
        # What `sluice` and `sluice help` say of the command.
        SUMMARY = "list the consumer groups"

        # @return [void]
        def run = with_admin { |admin| admin.groups.each { |group| out(group) } }
      end
    end
  end
end
