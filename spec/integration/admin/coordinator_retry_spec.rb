# frozen_string_literal: true

require "logger"

# A group call answered "not coordinator", "coordinator load in progress" or
# "coordinator not available" (a coordinator that moves, or a broker started
# seconds before) is made again within max_wait_timeout, as Java's
# AdminClient does: Admin#reset_offsets on a fresh cluster raised AdminError
# "Not coordinator". A real cluster answers so only by chance: librdkafka's
# mock cluster (made by the admin, test.mock.num.brokers) answers so on
# demand, to the admin's next OffsetFetch requests (committed_offsets; the
# mock has no DescribeGroups).
skipped = if !Sluice::Native::TestHooks.respond_to?(:mock_push_request_errors)
            "librdkafka #{Sluice.librdkafka_version} was built without its mock cluster"
          elsif ENV["SLUICE_USE_SYSTEM_LIBRDKAFKA"] == "1"
            "the system's librdkafka lacks patch 0009: a coordinator error in ListConsumerGroupOffsets crashes it (docs/BUILDING.md)"
          end
RSpec.describe "Admin: group calls made again while the coordinator moves or loads (mock cluster)", timeout: 30, skip: skipped do
  offset_fetch = 9 # Kafka's ApiKey
  not_coordinator = 16
  coordinator_load_in_progress = 14
  coordinator_not_available = 15

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  def mock_admin(max_wait_timeout)
    admin = Sluice::Admin.new do |config|
      config.kafka = { "test.mock.num.brokers": 1 }
      config.polling.mode = TestKafka::MODE
      config.max_wait_timeout = max_wait_timeout
      config.logger = Logger.new(nil)
    end
    [admin, admin.instance_variable_get(:@client)]
  end

  it "answers committed_offsets after the coordinator errors" do
    admin, native = mock_admin(5_000)
    Sluice::Native::TestHooks.mock_push_request_errors(native, offset_fetch,
                                                       [not_coordinator, coordinator_load_in_progress, coordinator_not_available])
    started = now
    expect(admin.committed_offsets("sluice-spec-mock-group")).to eq({})
    puts format("admin coordinator retry: 3 errors answered, committed_offsets returned in %<took>.2fs", took: now - started)
  ensure
    admin&.close
  end

  it "raises the coordinator's error once max_wait_timeout is over" do
    admin, native = mock_admin(1_000)
    Sluice::Native::TestHooks.mock_push_request_errors(native, offset_fetch, [not_coordinator] * 64)
    started = now
    expect { admin.committed_offsets("sluice-spec-mock-group") }.to raise_error(Sluice::Errors::AdminError) { |error|
      expect(error.code).to eq(:not_coordinator)
    }
    expect(now - started).to be_between(0.3, 1.25) # tried again, and within the timeout (1 s, and a margin for a busy CI)
  ensure
    admin&.close
  end
end
