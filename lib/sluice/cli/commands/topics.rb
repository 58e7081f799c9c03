# frozen_string_literal: true

module Sluice
  module CLI
    module Commands
      # sluice topics: the cluster's topic names, one a line (kafka-topics.sh --list).
      class Topics < Command
        # What `sluice` and `sluice help` say of the command.
        SUMMARY = "list the topics (internal ones left out)"

        # @return [void]
        def run = with_admin { |admin| admin.topics.each { |name| out(name) } }
      end
    end
  end
end
