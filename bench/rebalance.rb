# frozen_string_literal: true

# How long a group takes to rebalance, per group protocol (issue 40): three
# members subscribing together until every partition is owned and each
# member owns some ("spread"), then one member closing until the other two
# own every partition again ("leaver"). Against one broker; round after round,
# each with a group of its own.
#
#   ruby bench/rebalance.rb --brokers 127.0.0.1:9392 [--protocol classic|consumer] [--rounds 5]
#                           [--assignor cooperative-sticky] [--partitions 6]
#                           [--group-config consumer.heartbeat.interval.ms=5000,consumer.session.timeout.ms=45000]
#
# The broker's group.consumer.heartbeat.interval.ms paces KIP-848's
# rebalances (5 s by default; bin/kafka's brokers set 500 ms). --group-config
# gives each round's group its own settings first (Kafka 4's group configs,
# through the broker's ConfigCommand: the Kafka jars of KAFKA_VERSION in
# tmp/kafka/libs), so one test broker measures a default broker's pace too.
# Prints one line per round and a summary line starting with "rebalance".

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "sluice"
require "optparse"
require "open3"
require "securerandom"

options = { brokers: "127.0.0.1:9092", protocol: "classic", rounds: 5, assignor: "cooperative-sticky", partitions: 6 }
OptionParser.new do |parser|
  parser.on("--brokers B") { |v| options[:brokers] = v }
  parser.on("--protocol P", %w[classic consumer]) { |v| options[:protocol] = v }
  parser.on("--rounds N", Integer) { |v| options[:rounds] = v }
  parser.on("--assignor A") { |v| options[:assignor] = v }
  parser.on("--partitions N", Integer) { |v| options[:partitions] = v }
  parser.on("--group-config PAIRS") { |v| options[:group_config] = v }
end.parse!

# Kafka 4's per-group settings (KIP-848), set with the broker's own tool before the members join.
def configure_group(options, group)
  jars = File.expand_path("../tmp/kafka/libs/#{ENV.fetch("KAFKA_VERSION", "4.4.0")}/*", __dir__)
  command = ["java", "-cp", jars, "org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", options[:brokers].split(",").first,
             "--entity-type", "groups", "--entity-name", group, "--alter", "--add-config", options[:group_config]]
  output, status = Open3.capture2e(*command)
  raise "ConfigCommand failed: #{output}" unless status.success? && output.include?("Completed updating config")
end

# Who owns what, from the members' rebalance events; waited on with a deadline.
class Owners
  def initialize
    @lock = Mutex.new
    @changed = ConditionVariable.new
    @owned = Hash.new { |hash, key| hash[key] = [] }
  end

  def assigned(member, partitions) = change { @owned[member] |= partitions }

  def revoked(member, partitions) = change { @owned[member] -= partitions }

  # Waits until the block, given { member => partitions }, is true. @return [Float] seconds waited
  def await(within, &done)
    started = now
    @lock.synchronize do
      until done.call(@owned)
        left = within - (now - started)
        raise "not done within #{within}s: #{@owned}" if left <= 0

        @changed.wait(@lock, left)
      end
    end
    now - started
  end

  private

  def change
    @lock.synchronize do
      yield
      @changed.broadcast
    end
  end

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

def member(options, group, name, owners)
  kafka = { "bootstrap.servers": options[:brokers], "group.id": group, "group.protocol": options[:protocol] }
  kafka[:"partition.assignment.strategy"] = options[:assignor] if options[:protocol] == "classic"
  consumer = Sluice::Consumer.new do |config|
    config.kafka = kafka
    config.logger = Logger.new(nil)
  end
  consumer.monitor.subscribe("consumer.partitions_assigned") { |e| owners.assigned(name, e[:partitions].values.flatten) }
  consumer.monitor.subscribe("consumer.partitions_revoked") { |e| owners.revoked(name, e[:partitions].values.flatten) }
  consumer
end

admin = Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": options[:brokers] } }
topic = "sluice-bench-rebalance-#{SecureRandom.hex(4)}"
admin.create_topic(topic, partitions: options[:partitions])
all = (0...options[:partitions]).to_a
results = Array.new(options[:rounds]) do |round|
  owners = Owners.new
  group = "sluice-bench-rebalance-#{SecureRandom.hex(4)}"
  configure_group(options, group) if options[:group_config]
  names = %w[a b c]
  consumers = names.to_h { |name| [name, member(options, group, name, owners)] }
  readers = consumers.map { |_, consumer| Thread.new { consumer.each_message { nil } } }
  consumers.each_value { |consumer| consumer.subscribe(topic) }
  spread = owners.await(60) { |owned| names.all? { |name| owned[name].any? } && owned.values.flatten.sort == all }
  consumers.fetch("a").stop
  readers.first.join
  closed_at = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  consumers.fetch("a").close
  owners.revoked("a", all)
  leaver = owners.await(60) { |owned| %w[b c].flat_map { |name| owned[name] }.sort == all }
  leaver_total = Process.clock_gettime(Process::CLOCK_MONOTONIC) - closed_at
  consumers.except("a").each_value(&:stop)
  readers.drop(1).each(&:join)
  consumers.except("a").each_value(&:close)
  puts format("round %<round>d: spread %<spread>.2fs, leaver's partitions owned again %<leaver>.2fs after its close began",
              round: round + 1, spread: spread, leaver: leaver_total)
  [spread, leaver_total, leaver]
end
admin.delete_topic(topic)
admin.close

def stats(values) = values.sort.then { |v| format("p50 %.2fs max %.2fs", v[v.size / 2], v.last) }
puts "rebalance (#{options[:protocol]}#{", #{options[:assignor]}" if options[:protocol] == "classic"}" \
     "#{", #{options[:group_config]}" if options[:group_config]}, #{options[:rounds]} rounds, " \
     "#{options[:brokers]}): spread #{stats(results.map(&:first))}; leaver #{stats(results.map { |r| r[1] })}"
