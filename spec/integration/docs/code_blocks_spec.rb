# frozen_string_literal: true

require "open3"

# Every ```ruby block of README.md and docs/*.md runs as written (issue 29),
# each in a process of its own, in the order of its document, against the
# project's broker: a user copies them first. What a block may take as given
# is what the docs say: a `producer` (or `consumer`) started earlier, when the
# block uses one it does not build, and the topics it names. The broker's
# address is the only text changed (KAFKA_BROKERS may point elsewhere). A
# block that cannot run (another library's code, for comparison) says so on
# the line before its fence: <!-- not run: why -->.
RSpec.describe "The docs' code blocks", :kafka, order: :defined, timeout: 120 do
  root = File.expand_path("../../..", __dir__)
  given = {
    "producer" => 'producer = Sluice::Producer.new { |config| config.kafka = { "bootstrap.servers": BROKERS } }',
    "consumer" => 'consumer = Sluice::Consumer.new { |config| config.kafka = { "bootstrap.servers": BROKERS, "group.id": "docs" } }'
  }
  # The topics the blocks name (orders: the consumer examples read it from the start).
  topics = { "events" => 3, "orders" => 3, "payments" => 1, "users" => 1, "out" => 1 }
  groups = %w[billing uppercase audit docs]
  created = %w[clicks] # by the admin block, which deletes it again (unless an earlier run failed halfway)
  block_bound = 60 # s, for one block's process

  # [[file, line, code, reason not run or nil], ...] in document order.
  blocks = ["README.md", *Dir[File.join(root, "docs", "*.md")].sort.map { |path| path.delete_prefix("#{root}/") }].flat_map do |file|
    lines = File.readlines(File.join(root, file))
    lines.each_index.select { |i| lines[i].start_with?("```ruby") }.map do |start|
      finish = (start + 1...lines.size).find { |i| lines[i].start_with?("```") }
      reason = lines[0...start].reverse.find { |line| !line.strip.empty? }.to_s[/<!-- not run: (.+) -->/, 1]
      [file, start + 1, lines[start + 1...finish].join, reason]
    end
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
    producer = Sluice::Producer.new { |config| config.kafka = { "bootstrap.servers": TestKafka::BROKERS } }
    producer.produce_many_sync(Array.new(10) { |i| { topic: "orders", partition: 0, key: "order-#{i}", payload: "order #{i}" } })
    producer.close
  end

  it "finds the blocks (a parser that found none would pass everything)" do
    expect(blocks.count { |file, *| file == "README.md" }).to be >= 5
    expect(blocks.map(&:first).uniq).to include("docs/MIGRATING_FROM_WATERDROP.md")
  end

  blocks.each do |file, line, code, reason|
    it "#{file}:#{line} runs" do
      skip "not run: #{reason}" if reason
      # A library the block shows but this system lacks (Debian 13 has no prometheus-client-mmap).
      missing = code.scan(/^\s*require "([^"]+)"/).flatten.reject { |library| library.start_with?("sluice") || Gem.find_files(library).any? }
      skip "needs #{missing.join(", ")}, not installed here" if missing.any?

      needs = given.select { |name, _| code.match?(/\b#{name}\./) && !code.match?(/^\s*#{name} = /) }.values
      script = "require 'sluice'\nBROKERS = #{TestKafka::BROKERS.inspect}\n#{needs.join("\n")}\n" \
               "#{code.gsub(/"(?:127\.0\.0\.1|localhost):9092"/, "BROKERS")}"
      Open3.popen2e(RbConfig.ruby, "-I", File.join(root, "lib"), "-e", script) do |stdin, out, wait|
        stdin.close
        output = Thread.new { out.read }
        unless wait.join(block_bound)
          Process.kill("KILL", wait.pid)
          raise "#{file}:#{line} still ran after #{block_bound} s (a loop the docs never end?):\n#{output.value}"
        end
        expect(wait.value).to be_success, "#{file}:#{line} failed (#{wait.value}):\n#{output.value}"
      end
    end
  end
end
