# frozen_string_literal: true

# Admin's group calls made again while the group's coordinator moves or loads
# (Admin::CoordinatorRetry), for errors a group's item carries (a real
# cluster's DescribeConsumerGroups answered "Not coordinator" that way; the
# mock cluster has no DescribeGroups: spec/integration/admin/coordinator_retry_spec.rb
# drives the request-level ones). No broker: the requests' answers are given.
RSpec.describe Sluice::Admin::CoordinatorRetry do
  subject(:admin) { build_unreachable_admin }

  after { admin.close }

  def code(name) = Sluice::KafkaError.number_for(name)

  def described(error) = [["billing", error, error.zero? ? nil : "DescribeConsumerGroups: refused", "Empty", "", [], nil]]

  # Answers admin's requests with these results, one a try; returns the ms each try was given.
  def answer(*results)
    given = []
    allow(admin).to receive(:request) do |_action, _group, ms|
      given << ms
      results.size > 1 ? results.shift : results.first
    end
    given
  end

  it "describes the group after item errors of a coordinator that moves or loads, each try within what is left" do
    given = answer(described(code(:not_coordinator)), described(code(:coordinator_load_in_progress)),
                   described(code(:coordinator_not_available)), described(0))
    expect(admin.describe_group("billing")).to include(state: :empty)
    expect(given.size).to eq(4)
    expect(given).to eq(given.sort.reverse)
    expect(given).to all(be_between(1, 1_000))
  end

  it "raises the first other error, without trying again" do
    given = answer(described(code(:not_coordinator)), described(code(:group_authorization_failed)), described(0))
    expect { admin.describe_group("billing") }.to raise_error(Sluice::Errors::AdminError) { |error|
      expect(error.code).to eq(:group_authorization_failed)
    }
    expect(given.size).to eq(2)
  end

  it "raises the coordinator's error once max_wait_timeout is over" do
    given = answer(described(code(:not_coordinator)))
    started = Sluice::Shared::Clock.now
    expect { admin.describe_group("billing") }.to raise_error(Sluice::Errors::AdminError) { |error|
      expect(error.code).to eq(:not_coordinator)
    }
    expect(given.size).to be > 2
    expect(Sluice::Shared::Clock.now - started).to be < 1.0
  end
end
