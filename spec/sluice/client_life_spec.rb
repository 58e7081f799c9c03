# frozen_string_literal: true

# ClientLife without a broker, through an Admin whose native client and poller are fakes: the state
# machine (:initial, :connected, :closing, :closed) and its events, the refusals of a closed client, a
# close that is idempotent and runs its steps in order, and a connect that leaves nothing behind when it
# fails. The integration specs reach these only with a broker, and never the failures.
RSpec.describe Sluice::ClientLife do
  # A native admin that records what is done to it.
  native = Class.new do
    class << self
      attr_accessor :made, :refuse, :destroying # destroying: [entered, leave] Queues a destroy waits on

      def new(pairs)
        raise Sluice::Errors::ConfigurationInvalidError, "refused by the fake native client" if refuse

        super().tap { |client| (made << client).last.pairs = pairs }
      end
    end
    attr_accessor :pairs, :destroyed, :token_failure

    def progress = 0

    def destroy
      entered, leave = self.class.destroying
      (entered << true) && leave.pop if entered
      (self.destroyed = true) && nil
    end

    def oauthbearer_set_token_failure(reason) = (self.token_failure = reason) && nil
  end

  let(:registrations) { [] }
  let(:refuse_registration) { false }
  # A poller (config.polling.poller must be one) that records registrations, and may refuse one.
  let(:poller) do
    log = registrations
    refuse = refuse_registration
    Sluice::Polling::Poller.new.tap do |fake|
      fake.define_singleton_method(:register) { |state| (log << [:register, state]) && (raise Interrupt if refuse) }
      fake.define_singleton_method(:unregister) { |state| log << [:unregister, state] }
    end
  end
  let(:steps) { [] }
  let(:admin_class) do
    steps = self.steps
    Class.new(Sluice::Admin) do
      define_method(:native_class) { native }
      define_method(:detach) { (steps << :detach) && super() }
      private :native_class, :detach
    end
  end
  let(:events) { [] }

  before do
    native.made = []
    native.refuse = false
    native.destroying = nil
  end

  def build(**settings)
    monitor = Sluice::Monitor.new(logger: Logger.new(nil))
    %w[admin.connected admin.closing admin.closed].each { |name| monitor.subscribe(name) { |event| events << [name, event[:admin_id]] } }
    admin_class.new do |config|
      config.id = "lifecycle-1"
      config.kafka = { "bootstrap.servers": "127.0.0.1:1" }
      config.monitor = monitor
      config.polling.poller = poller
      settings.each { |name, value| config.public_send(:"#{name}=", value) }
    end
  end

  it "is :connected once new returns: its native client built from the settings and registered" do
    admin = build

    expect(admin.status).to eq(:connected)
    expect(native.made.map(&:pairs)).to eq([[%w[bootstrap.servers 127.0.0.1:1], %w[isolation.level read_uncommitted]]]) # Admin::Config#kafka_pairs
    expect(registrations.map(&:first)).to eq([:register])
    expect(events).to eq([["admin.connected", "lifecycle-1"]])
    admin.close
  end

  it "closes in order (waiters released, polling stopped, the native client destroyed), then is :closed" do
    admin = build
    statuses = []
    admin.monitor.subscribe("admin.closing") { statuses << admin.status }
    admin.close

    expect(steps).to eq([:detach])
    expect(registrations.map(&:first)).to eq(%i[register unregister])
    expect(native.made.map(&:destroyed)).to eq([true])
    expect([statuses, admin.status, admin.closed?]).to eq([[:closing], :closed, true])
    expect(events.map(&:first)).to eq(%w[admin.connected admin.closing admin.closed])
  end

  # Thread.handle_interrupt is no fence against Fiber#raise: the stop lands in the wait for the destroy.
  it "is :closed when an Async task's close is stopped while the native client is destroyed", :async do
    admin = build
    entered = Queue.new
    leave = Queue.new
    native.destroying = [entered, leave]
    Async do
      closer = Async { admin.close }
      entered.pop
      closer.stop
      leave << true
    end.wait

    expect([native.made.map(&:destroyed), admin.status]).to eq([[true], :closed])
    expect(admin.close).to be_nil # nothing left to close
    expect(registrations.map(&:first)).to eq(%i[register unregister])
  end

  it "closes once: a second close does nothing and announces nothing" do
    admin = build
    admin.close
    expect(admin.close).to be_nil

    expect(registrations.map(&:first)).to eq(%i[register unregister])
    expect(events.map(&:first)).to eq(%w[admin.connected admin.closing admin.closed])
  end

  it "refuses calls once closed, naming the client" do
    admin = build
    admin.close

    expect { admin.topics }.to raise_error(Sluice::Errors::AdminClosedError, "admin lifecycle-1 is closed")
    expect { admin.oauthbearer_set_token_failure("no token") }.to raise_error(Sluice::Errors::AdminClosedError, "admin lifecycle-1 is closed")
    expect { admin.oauthbearer_set_token(token: "t", lifetime_ms: 1, principal_name: "p") }
      .to raise_error(Sluice::Errors::AdminClosedError, "admin lifecycle-1 is closed")
  end

  it "hands a token failure to the native client while open" do
    admin = build
    admin.oauthbearer_set_token_failure(:expired)

    expect(native.made.last.token_failure).to eq("expired")
    admin.close
  end

  it "refuses calls made while the close is under way" do
    admin = build
    during = nil
    admin.monitor.subscribe("admin.closing") do
      admin.topics
    rescue Sluice::Errors::AdminClosedError => e
      during = e
    end
    admin.close

    expect(during).to have_attributes(message: "admin lifecycle-1 is closed")
  end

  context "when registration fails or is interrupted" do
    let(:refuse_registration) { true }

    it "leaves nothing behind: unregistered, the native client destroyed" do
      expect { build }.to raise_error(Interrupt)
      expect(registrations.map(&:first)).to eq(%i[register unregister])
      expect(registrations.map(&:last).uniq.size).to eq(1) # the state it tried to register
      expect(native.made.map(&:destroyed)).to eq([true])
      expect(events).to eq([])
    end
  end

  # One deadline per close (issue 53, item 1): what every wait of the close, on any thread, takes.
  it "keeps the first close's deadline, and caps each wait by what is left of it" do
    life = Sluice::ClientLife.new(Object.new, kind: :admin, id: "deadline-1", monitor: nil, poller: poller, config: nil)
    expect([life.deadline, life.wait_ms(500)]).to eq([nil, 500]) # no close: waits as asked

    deadline = life.begin_close(10_000)
    expect(life.begin_close(60_000)).to eq(deadline) # a later close keeps the first one's
    expect(life.deadline(0.5)).to be_within(0.001).of(deadline - 5)
    expect(life.wait_ms(500)).to eq(500)
    expect(life.wait_ms(60_000)).to be_between(9_900, 10_000)

    life.close_abandoned
    life.begin_close(1)
    expect(life.wait_ms(500)).to eq(1) # spent: the least librdkafka takes as a wait (0 is "no wait")
  end

  it "registers nothing when the native client refuses the settings" do
    native.refuse = true

    expect { build }.to raise_error(Sluice::Errors::ConfigurationInvalidError, "refused by the fake native client")
    expect(registrations).to eq([])
  end

  it "refuses invalid settings before anything native is built" do
    expect { build(max_wait_timeout: 0) }.to raise_error(Sluice::Errors::ConfigurationInvalidError, /max_wait_timeout/)
    expect(native.made).to eq([])
  end
end
