# frozen_string_literal: true

module Sluice
  module CLI
    module Commands
      # sluice topics: the cluster's topic names, one a line (kafka-topics.sh --list).
      class Topics < Command
        SUMMARY = "list the topics (internal ones left out)"

        def run = with_admin { |admin| admin.topics.each { |name| out(name) } }
      end
    end
  end
end
