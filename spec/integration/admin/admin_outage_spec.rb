# frozen_string_literal: true

# Admin answers never lie (issue 27): a listing that a broker did not answer
# raises instead of looking like "no groups". A broker of the spec's own
# (OwnBroker), killed under a connected admin client.
RSpec.describe "Admin when the broker stops answering", :kafka, :own_broker, timeout: 90 do
  before { OwnBroker.start }
  after { OwnBroker.stop }

  it "raises from groups instead of answering [] when the broker does not answer" do
    admin = Sluice::Admin.new do |config|
      config.kafka = { "bootstrap.servers": OwnBroker::BROKERS }
      config.max_wait_timeout = 3_000
    end
    consumer = Sluice::Consumer.new do |config|
      config.kafka = { "bootstrap.servers": OwnBroker::BROKERS, "group.id": "sluice-outage-#{rand(1 << 30)}" }
      config.logger = Logger.new(nil)
    end
    OwnBroker.create_topic("sluice-spec-outage")
    consumer.assign("sluice-spec-outage" => [0])
    consumer.commit("sluice-spec-outage" => { 0 => 0 }) # the group exists from its first commit
    expect(admin.groups).not_to be_empty
    OwnBroker.signal("KILL")
    expect { admin.groups }.to raise_error(Sluice::Errors::AdminError)
  ensure
    consumer&.close(timeout: 500)
    admin&.close
  end
end
