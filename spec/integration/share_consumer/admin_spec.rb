# frozen_string_literal: true

# The admin of a share group (issue 57 item 3), with a member in it: what librdkafka 2.15.0 reaches
# (deletion, through DeleteGroups) and what it does not, named rather than answered as for no group
# (a description, start offsets: ShareGroupDescribe and DescribeShareGroupOffsets have no librdkafka API).
RSpec.describe Sluice::Admin, :kafka, :share_groups do
  include SluiceCommand

  # A member of group that read and accepted the topic's first records: the group exists, with a
  # member, and starts at count (its start offset moved past what was accepted).
  def joined_member(group, count)
    produce_share_records(count)
    member = share_consumer(group, acknowledgement: :explicit)
    member.subscribe(share_topic)
    expect(poll_records(member, count) { |record| member.accept(record) }.size).to eq(count)
    member.commit_sync
    member
  end

  def share_sluice(*args) = sluice(*args, env: { "KAFKA_BROKERS" => ShareGroups.brokers })

  it "deletes a share group once it has no member, and its start offsets with it (sluice delete-group)" do
    group = share_group
    member = joined_member(group, 3)

    refused = share_sluice("delete-group", group)
    expect(refused.code).to eq(1)
    expect(refused.stderr).to include("Sluice::Errors::GroupNotEmptyError", group)

    expect(member.close).to be(true)
    produce_share_records(1) # offset 3: where the group would start, had it not been deleted
    deleted = share_sluice("delete-group", group)
    expect(deleted.code).to eq(0), deleted.stderr
    expect(deleted.stdout).to eq("deleted group #{group}\n")
    expect { share_admin.delete_group(group) }.to raise_error(Sluice::Errors::UnknownGroupError)

    # Its configs outlive it (share.auto.offset.reset still earliest): a new member starts from 0 again.
    again = share_consumer(group)
    again.subscribe(share_topic)
    expect(poll_records(again, 4).map(&:offset)).to eq([0, 1, 2, 3])
  end

  it "neither lists nor describes a share group, and says a share group may be why (sluice lag too)" do
    group = share_group
    joined_member(group, 1)

    expect(share_admin.groups).not_to include(group)
    expect { share_admin.describe_group(group) }.to raise_error(Sluice::Errors::UnknownGroupError) { |error|
      expect(error.message).to include("no consumer group #{group} (or a share group: librdkafka describes none)")
    }
    lag = share_sluice("lag", group)
    expect(lag.code).to eq(1)
    expect(lag.stderr).to include("Sluice::Errors::UnknownGroupError", "or a share group")
  end

  it "refuses to reset a share group's offsets with NotConsumerGroupError, committing nothing (sluice reset too)" do
    group = share_group
    joined_member(group, 2)

    expect { share_admin.reset_offsets(group, share_topic, :earliest) }.to raise_error(Sluice::Errors::NotConsumerGroupError) { |error|
      expect(error.code).to eq(:group_id_not_found)
      expect(error.message).to include("#{group} is a share group", "kafka-share-groups.sh --reset-offsets")
    }
    reset = share_sluice("reset", group, share_topic, "--to", "earliest")
    expect(reset.code).to eq(1)
    expect(reset.stderr).to include("Sluice::Errors::NotConsumerGroupError")
    # A dry run cannot tell (librdkafka describes a share group as none), and says so.
    plan = share_sluice("reset", group, share_topic, "--to", "earliest", "--dry-run")
    expect(plan.code).to eq(0)
    expect(plan.stderr).to include("no consumer group #{group} is known", "refused if #{group} is a share group's id")
    expect(share_admin.committed_offsets(group)).to eq({})
  end
end
