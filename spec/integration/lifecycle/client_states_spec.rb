# frozen_string_literal: true

# One lifecycle for every kind of client (Shared::ClientLife): the same states,
# the same events around them, the same refusal once closed.
RSpec.describe "The client lifecycle of every kind (#{TestKafka::MODE} mode)", :kafka do
  kinds = {
    producer: [-> { Sluice::Producer }, {}, Sluice::Errors::ProducerClosedError],
    consumer: [-> { Sluice::Consumer }, { "group.id": "sluice-states" }, Sluice::Errors::ConsumerClosedError],
    admin: [-> { Sluice::Admin }, {}, Sluice::Errors::AdminClosedError]
  }

  kinds.each do |kind, (klass, kafka, closed_error)|
    context "a #{kind}" do
      let(:monitor) { Sluice::Monitor.new(logger: Logger.new(nil)) }
      let(:seen) { [] }
      let(:client) do
        %w[connected closing closed].each { |what| monitor.subscribe("#{kind}.#{what}") { |event| seen << [event.id, client_status] } }
        klass.call.new do |config|
          config.kafka = { "bootstrap.servers": TestKafka::BROKERS, **kafka }
          config.polling.mode = TestKafka::MODE
          config.monitor = monitor
        end
      end

      # The client is not assigned yet while connected is emitted inside new.
      def client_status = @client_built ? client.status : :in_new

      it "goes :connected -> :closing -> :closed, emitting #{kind}.connected, .closing and .closed" do
        built = client
        @client_built = true
        expect(built.status).to eq(:connected)
        expect(built.closed?).to be(false)
        expect(built.close).to be_nil
        expect(built.status).to eq(:closed)
        expect(built.closed?).to be(true)
        expect(seen).to eq([["#{kind}.connected", :in_new], ["#{kind}.closing", :closing], ["#{kind}.closed", :closed]])
        expect(Sluice::Shared::Shutdown.open_clients).not_to include(built)
      end

      it "closes once: a second close emits nothing" do
        built = client
        built.close
        expect { built.close }.not_to(change { seen.size })
      end

      it "refuses an OAUTHBEARER answer once closed, with the #{kind}'s closed error" do
        built = client
        built.close
        expect { built.oauthbearer_set_token(token: "t", lifetime_ms: 1, principal_name: "p") }
          .to raise_error(closed_error, /#{kind} .* is closed/)
        expect { built.oauthbearer_set_token_failure("none") }.to raise_error(closed_error)
      end
    end
  end
end
