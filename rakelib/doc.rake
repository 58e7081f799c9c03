# frozen_string_literal: true

# The API docs (YARD, settings in .yardopts): lib's comments, the README, docs/*.md and the
# changelog, as rubydoc.info shows them.
desc "Build the API docs into tmp/yard (YARD; a warning fails the build)"
task :doc do
  sh "yard doc --fail-on-warning"
end

namespace :doc do
  desc "Fail unless YARD finds the public API 100% documented and nothing to warn about (bin/doc-check)"
  task :check do
    sh "bin/doc-check"
  end
end
