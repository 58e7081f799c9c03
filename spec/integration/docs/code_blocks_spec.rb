# frozen_string_literal: true

require "etc"
require "fileutils"
require "open3"
require "tmpdir"

# Every ```ruby block of README.md and docs/*.md runs alone, as a reader who
# copies it into a file runs it (issues 29 and 42): `ruby -Ilib block.rb`, in a
# process of its own, with nothing but the block's text. So each block has its
# own `require "sluice"`, builds its own clients and closes them. The only text
# changed is the broker's address (KAFKA_BROKERS may point elsewhere); what the
# spec prepares is on the broker, not in Ruby: the topics the blocks name, and
# no group left from an earlier run. No messages: a block that reads writes
# what it reads first (issue 58), as on a fresh broker.
#
# A document's blocks run in its order, one after another, but none may lean
# on a group an earlier one left: before each block the groups it names are
# deleted, as on a fresh broker (the admin example gives its group offsets
# before describing it). The documents run side by side, as many
# at once as there are cores. A block that cannot run (another library's
# code, for comparison) says so on the line before its fence:
# <!-- not run: why -->.
RSpec.describe "The docs' code blocks", :kafka, order: :defined, timeout: 180 do
  root = File.expand_path("../../..", __dir__)
  # The topics the blocks name.
  topics = { "events" => 3, "orders" => 3, "payments" => 1, "users" => 1, "out" => 1 }
  groups = %w[billing billing-parallel uppercase audit shipping] # each named by one document's runnable blocks only
  created = %w[clicks] # by the admin block, which deletes it again (unless an earlier run failed halfway)
  block_bound = 60 # s, for one block's process

  block = Struct.new(:file, :line, :code, :reason) do
    def name = "#{file}:#{line}"
  end
  # In document order, README.md first.
  blocks = ["README.md", *Dir[File.join(root, "docs", "*.md")].sort.map { |path| path.delete_prefix("#{root}/") }].flat_map do |file|
    lines = File.readlines(File.join(root, file))
    lines.each_index.select { |i| lines[i].start_with?("```ruby") }.map do |start|
      finish = (start + 1...lines.size).find { |i| lines[i].start_with?("```") }
      code = lines[start + 1...finish].join
      reason = lines[0...start].reverse.find { |line| !line.strip.empty? }.to_s[/<!-- (not run: .+) -->/, 1]
      # A library the block shows but this system lacks (Debian 13 has no prometheus-client-mmap).
      missing = code.scan(/^\s*require "([^"]+)"/).flatten.reject { |library| library.start_with?("sluice") || Gem.find_files(library).any? }
      reason ||= "needs #{missing.join(", ")}, not installed here" if missing.any?
      block.new(file, start + 1, code, reason)
    end
  end
  runnable = blocks.reject(&:reason)

  # @return [Array(Process::Status, String)] how the block's process ended, and what it printed
  run_alone = lambda do |dir, code_block|
    path = File.join(dir, "#{code_block.name.tr("/:.", "_")}.rb")
    File.write(path, code_block.code.gsub(/"(?:127\.0\.0\.1|localhost):9092"/, TestKafka::BROKERS.inspect))
    Open3.popen2e(RbConfig.ruby, "-I", File.join(root, "lib"), path, chdir: dir) do |stdin, out, wait|
      stdin.close
      output = Thread.new { out.read }
      unless wait.join(block_bound)
        Process.kill("KILL", wait.pid)
        next [wait.value, "still ran after #{block_bound} s (a loop the docs never end?):\n#{output.value}"]
      end
      [wait.value, output.value]
    end
  end

  # Deletes the groups the block names, so that it finds none an earlier block left.
  fresh_groups = lambda do |admin, code_block|
    named = groups.select { |group| code_block.code.include?(group.inspect) }
    (named & (named.any? ? admin.groups : [])).each { |group| admin.delete_group(group) }
  end

  before(:all) do
    admin = Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": TestKafka::BROKERS } }
    existing = admin.topics
    created.each { |name| admin.delete_topic(name) if existing.include?(name) }
    topics.each { |name, partitions| admin.create_topic(name, partitions: partitions) unless existing.include?(name) }
    # A group of an earlier local run would start where that run stopped: the examples start afresh.
    listed = admin.groups
    groups.each { |group| admin.delete_group(group) if listed.include?(group) }
    admin.close

    # Each block's outcome arrives on its own Queue; the examples wait on them.
    @dir = Dir.mktmpdir("sluice-docs")
    @outcomes = runnable.to_h { |code_block| [code_block.name, Queue.new] }
    documents = Queue.new
    runnable.group_by(&:file).each_value { |document| documents << document }
    documents.close
    @lanes = Array.new([Etc.nprocessors, 2].max) do
      Thread.new do
        lane_admin = Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": TestKafka::BROKERS } }
        while (document = documents.pop)
          document.each do |code_block|
            @outcomes[code_block.name] << begin
              fresh_groups.call(lane_admin, code_block)
              run_alone.call(@dir, code_block)
            rescue StandardError => e
              [nil, "could not run: #{e.class}: #{e.message}"]
            end
          end
        end
      ensure
        lane_admin&.close
      end
    end
  end

  after(:all) do
    @lanes&.each(&:join)
    FileUtils.rm_rf(@dir) if @dir
  end

  it "finds the blocks (a parser that found none would pass everything)" do
    # README keeps one example each (producer, consumer, parallel, admin); the rest live in docs/.
    expect(blocks.count { |code_block| code_block.file == "README.md" }).to be >= 4
    expect(blocks.map(&:file).uniq).to include("docs/MIGRATING_FROM_WATERDROP.md", "docs/PRODUCING.md", "docs/CONSUMING.md")
    expect(runnable.size).to be >= 15
  end

  blocks.each do |code_block|
    it "#{code_block.name} runs alone" do
      skip code_block.reason if code_block.reason

      status, output = @outcomes.fetch(code_block.name).pop
      expect(status).to be_success, "#{code_block.name} failed alone (#{status.inspect}):\n#{output}"
    end
  end
end
