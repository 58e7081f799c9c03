# frozen_string_literal: true

require "json"
require "time"

# sluice lag, reset and delete-group against the broker: a topic of known messages
# (p0: 10, p1: 6, timestamps one second apart from T0), groups that commit
# known offsets, and the numbers lag shows after each move.
RSpec.describe "sluice lag and reset", :kafka, timeout: 120 do
  include SluiceCommand

  t0 = Time.utc(2024, 1, 1)

  before(:all) do
    # The messages carry 2024 timestamps: under the broker's default
    # retention (7 days) its next retention check (every 5 minutes) deletes
    # them, and earliest and time lookups then answer the end.
    @topics = SluiceCommand.create_topics({ offsets: 2, members: 1 }, config: { "retention.ms" => "-1" })
    producer = Sluice::Producer.new { |config| config.kafka = { "bootstrap.servers": TestKafka::BROKERS } }
    messages = { 0 => 10, 1 => 6 }.flat_map do |partition, count|
      Array.new(count) { |i| { topic: @topics[:offsets], partition: partition, payload: "p#{partition}-#{i}", timestamp: t0 + i } }
    end
    producer.produce_many_sync(messages)
    producer.produce_sync(topic: @topics[:members], payload: "for the member")
    producer.close
  end

  after(:all) { SluiceCommand.delete_topics(@topics.values) if @topics }

  let(:topic) { @topics.fetch(:offsets) }
  let(:group) { "sluice-cli-group-#{SecureRandom.hex(4)}" }

  # Commits offsets for group without ever joining it.
  def commit(group, offsets)
    consumer = Sluice::Consumer.new do |config|
      config.kafka = { "bootstrap.servers": TestKafka::BROKERS, "group.id": group, "enable.auto.commit": false }
      config.logger = Logger.new(nil)
    end
    consumer.assign(topic => offsets)
    consumer.commit(topic => offsets)
  ensure
    consumer&.close
  end

  def lag_json(group)
    result = sluice("lag", group, "-J")
    expect(result.code).to eq(0), result.stderr
    JSON.parse(result.stdout)
  end

  def committed(group) = lag_json(group)["partitions"].to_h { |row| [row["partition"], row["committed"]] }

  it "shows per partition the committed offset, the end and the lag, and the total" do
    commit(group, { 0 => 4, 1 => 6 })

    table = sluice("lag", group)
    expect(table.code).to eq(0), table.stderr
    expect(table.stdout.lines.map(&:split)).to eq([%w[TOPIC PARTITION COMMITTED END LAG], [topic, "0", "4", "10", "6"],
                                                   [topic, "1", "6", "6", "0"], %w[total lag 6]])
    expect(lag_json(group)).to eq("group" => group, "total" => 6,
                                  "partitions" => [{ "topic" => topic, "partition" => 0, "committed" => 4, "end" => 10, "lag" => 6 },
                                                   { "topic" => topic, "partition" => 1, "committed" => 6, "end" => 6, "lag" => 0 }])
  end

  it "exits 1 naming an unknown group" do
    result = sluice("lag", group)
    expect(result.code).to eq(1)
    expect(result.stderr).to include("Sluice::Errors::UnknownGroupError", group)
  end

  it "resets to earliest, then latest, and lag follows" do
    commit(group, { 0 => 4, 1 => 2 })

    earliest = sluice("reset", group, topic, "--to", "earliest")
    expect(earliest.code).to eq(0), earliest.stderr
    expect(earliest.stdout.lines.drop(2).map(&:split)).to eq([[topic, "0", "4", "0"], [topic, "1", "2", "0"]])
    expect(lag_json(group)["total"]).to eq(16)

    latest = sluice("reset", group, topic, "--to", "latest")
    expect(latest.code).to eq(0), latest.stderr
    expect(committed(group)).to eq(0 => 10, 1 => 6)
    expect(lag_json(group)["total"]).to eq(0)
  end

  it "resets to a time, ISO 8601 or milliseconds: each partition's first message at or after it" do
    commit(group, { 0 => 10, 1 => 6 })

    expect(sluice("reset", group, topic, "--to", (t0 + 4).iso8601).code).to eq(0)
    expect(committed(group)).to eq(0 => 4, 1 => 4)
    expect(lag_json(group)["total"]).to eq(6 + 2)

    expect(sluice("reset", group, topic, "--to", ((t0 + 7).to_i * 1000).to_s).code).to eq(0)
    expect(committed(group)).to eq(0 => 7, 1 => 6) # p1 has nothing at or after T0+7: its end
  end

  it "prints the plan with --dry-run and commits nothing" do
    commit(group, { 0 => 4, 1 => 6 })

    plan = sluice("reset", group, topic, "--to", "earliest", "--dry-run")
    expect(plan.code).to eq(0), plan.stderr
    expect(plan.stdout).to include("dry run, nothing committed")
    expect(plan.stdout.lines.drop(2).map(&:split)).to eq([[topic, "0", "4", "0"], [topic, "1", "6", "0"]])
    expect(committed(group)).to eq(0 => 4, 1 => 6)
  end

  it "says in a dry run of a group nobody knows that a real reset creates it, or is refused for a share group" do
    plan = sluice("reset", group, topic, "--to", "latest", "--dry-run")

    expect(plan.code).to eq(0), plan.stderr
    expect(plan.stderr).to include("no consumer group #{group} is known", "refused if #{group} is a share group's id")
    expect(sluice("lag", group).stderr).to include("no consumer group #{group}") # still none: nothing committed
  end

  it "refuses to reset a group with an active member, and changes nothing" do
    member_topic = @topics.fetch(:members)
    commit_member = start_sluice("tail", member_topic, "-G", group, "-o", "beginning", "-q")
    expect(commit_member.next_line).to eq("for the member") # assigned: a member of the group now

    refused = sluice("reset", group, member_topic, "--to", "earliest")
    expect(refused.code).to eq(1)
    expect(refused.stderr).to include("group #{group} has 1 active member(s)", "nothing was changed")
    not_deleted = sluice("delete-group", group)
    expect(not_deleted.code).to eq(1)
    expect(not_deleted.stderr).to include("Sluice::Errors::GroupNotEmptyError", group)

    commit_member.signal("TERM")
    status, stderr = commit_member.finish
    expect(status.exitstatus).to eq(143)
    expect(stderr).to eq("")
    # It left the group as it closed (no waiting out the session timeout): the reset goes through now.
    expect(sluice("reset", group, member_topic, "--to", "earliest").code).to eq(0)
  ensure
    commit_member&.kill
  end

  it "deletes a group with no member, and what it committed (delete-group)" do
    commit(group, { 0 => 4, 1 => 6 })

    deleted = sluice("delete-group", group)
    expect(deleted.code).to eq(0), deleted.stderr
    expect(deleted.stdout).to eq("deleted group #{group}\n")
    expect(sluice("lag", group).stderr).to include("Sluice::Errors::UnknownGroupError")
    again = sluice("delete-group", group)
    expect(again.code).to eq(1)
    expect(again.stderr).to include("Sluice::Errors::UnknownGroupError", group)
  end

  it "exits 2 with the usage when --to is missing or not a target" do
    missing = sluice("reset", group, topic)
    expect(missing.code).to eq(2)
    expect(missing.stderr).to include("--to is required", "usage: sluice reset GROUP TOPIC")
    expect(sluice("reset", group, topic, "--to", "yesterday").code).to eq(2)
  end
end
