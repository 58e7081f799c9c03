# frozen_string_literal: true

# producer.with(topic_config:, max_wait_timeout:): views of one producer whose
# produce_* use their own topic-level librdkafka settings and wait.
RSpec.describe "Variants (#{TestKafka::MODE} mode)", :kafka do
  let(:producer) { build_producer }

  it "produces through the producer's client with topic settings of its own" do
    variant = producer.with(topic_config: { acks: "all", "compression.codec": "zstd" }, max_wait_timeout: 30_000)
    expect(variant).to be_a(Sluice::Producer::Variant)
    expect(variant.max_wait_timeout).to eq(30_000)
    expect(variant.topic_config).to eq(acks: "all", "compression.codec": "zstd")
    report = variant.produce_sync(topic: "sluice-spec-many", payload: "zstd", key: "v")
    expect(consume_reports([report]).first).to include(payload: "zstd", key: "v")
    expect(variant.produce_many_sync([{ topic: "sluice-spec-many", payload: "b" }]).first).to be_success
    expect(variant.produce_async(topic: "sluice-spec-many", payload: "c").wait).to be_success
    expect(variant.id).to eq(producer.id) # everything else is the producer's
  end

  it "really applies its topic settings: a short message.timeout.ms fails fast where the producer's own waits" do
    unreachable = build_unreachable_producer
    hasty = unreachable.with(topic_config: { "message.timeout.ms": 300 })
    # 300 ms; librdkafka's own message.timeout.ms is 300 s.
    expect_within(4, guards: "the producer's max_wait_timeout (5 s): the variant's message.timeout.ms not applied") do
      expect { hasty.produce_sync(topic: "sluice-spec-1p", payload: "x") }
        .to raise_error(Sluice::Errors::ProduceError) { |e| expect(e.code).to eq(:msg_timed_out) }
    end
    patient = unreachable.produce_async(topic: "sluice-spec-3p", payload: "y")
    sleep 0.6
    expect(patient).to be_pending
    unreachable.close!
  end

  it "waits its own max_wait_timeout in produce_sync and produce_many_sync" do
    unreachable = build_unreachable_producer(max_wait_timeout: 60_000)
    quick = unreachable.with(max_wait_timeout: 200)
    expect_within(10, guards: "the producer's max_wait_timeout (60 s) instead of the variant's 200 ms, twice") do
      expect { quick.produce_sync(topic: "sluice-spec-1p", payload: "x") }.to raise_error(Sluice::Errors::WaitTimeoutError)
      expect { quick.produce_many_sync([{ topic: "sluice-spec-1p", payload: "x" }]) }.to raise_error(Sluice::Errors::WaitTimeoutError)
    end
    unreachable.close!
  end

  it "applies its settings to tombstones and to flushes of the producer's buffer" do
    unreachable = build_unreachable_producer
    hasty = unreachable.with(topic_config: { "message.timeout.ms": 300 }, max_wait_timeout: 5_000)
    hasty.buffer(topic: "sluice-spec-1p", payload: "buffered")
    expect { hasty.flush_sync }.to raise_error(Sluice::Errors::ProduceError) { |e| expect(e.code).to eq(:msg_timed_out) }
    expect { hasty.tombstone_sync(topic: "sluice-spec-1p", key: "k", partition: 0) }
      .to raise_error(Sluice::Errors::ProduceError) { |e| expect(e.code).to eq(:msg_timed_out) }
    unreachable.close!
  end

  it "raises ConfigurationInvalidError when built with settings librdkafka refuses at topic level" do
    expect { producer.with(topic_config: { acks: "sometimes" }) }.to raise_error(Sluice::Errors::ConfigurationInvalidError, /acks/)
    expect { producer.with(topic_config: { "bootstrap.servers": "x:1" }) }
      .to raise_error(Sluice::Errors::ConfigurationInvalidError, /bootstrap\.servers/)
    expect { producer.with(topic_config: { "no.such.thing": 1 }) }.to raise_error(Sluice::Errors::ConfigurationInvalidError)
    expect { producer.with(topic_config: "acks=all") }.to raise_error(Sluice::Errors::ConfigurationInvalidError, /Hash/)
    expect { producer.with(max_wait_timeout: 0) }.to raise_error(Sluice::Errors::ConfigurationInvalidError, /max_wait_timeout/)
  end

  # librdkafka would refuse these only when a topic handle is made, without
  # saying why (it used to surface as "at most 64 topics").
  it "refuses, when built, topic settings that conflict with the producer's own, with librdkafka's reason" do
    idempotent = build_producer(kafka: { "enable.idempotence": true })
    expect { idempotent.with(topic_config: { acks: 0 }) }
      .to raise_error(Sluice::Errors::ConfigurationInvalidError, /`acks` must be set to `all` when `enable.idempotence` is true/)
    expect { idempotent.with(topic_config: { "queuing.strategy": "lifo" }) }
      .to raise_error(Sluice::Errors::ConfigurationInvalidError, /`queuing.strategy` must be set to `fifo`/)
    expect(idempotent.with(topic_config: { acks: "all" }).produce_sync(topic: "sluice-spec-many", payload: "ok")).to be_success

    lingering = build_producer(kafka: { "linger.ms": 100 })
    expect { lingering.with(topic_config: { "message.timeout.ms": 50 }) }
      .to raise_error(Sluice::Errors::ConfigurationInvalidError, /`message.timeout.ms` must be greater than `linger.ms`/)
    transactional = build_producer(kafka: { "transactional.id": "sluice-spec-variant-#{rand(1 << 30)}" })
    expect { transactional.with(topic_config: { "message.timeout.ms": 120_000 }) }
      .to raise_error(Sluice::Errors::ConfigurationInvalidError, /`message.timeout.ms` must be set <= `transaction.timeout.ms`/)
  ensure
    [idempotent, lingering, transactional].compact.each(&:close)
  end

  it "produces to any number of topics, the producer's and its variants' (no cap on topic handles)" do
    unreachable = build_unreachable_producer
    variant = unreachable.with(topic_config: { acks: 1 })
    handles = Array.new(100) { |i| unreachable.produce_async(topic: "sluice-spec-topic-#{i}", payload: "p") }
    handles += Array.new(100) { |i| variant.produce_async(topic: "sluice-spec-variant-topic-#{i}", payload: "v") }
    expect(handles.size).to eq(200)
    expect(unreachable.outstanding).to eq(200)
    unreachable.close!
  end

  it "caches: variants with the same settings share one topic configuration" do
    a = producer.with(topic_config: { acks: 1, "message.timeout.ms": 20_000 })
    b = producer.variant(topic_config: { "message.timeout.ms": "20000", acks: "1" })
    expect(b.topic_config_id).to eq(a.topic_config_id)
    expect(producer.with(topic_config: { acks: "all" }).topic_config_id).not_to eq(a.topic_config_id)
    expect(producer.with.topic_config_id).to eq(0)
    expect(producer.with).to be_default
    a.produce_sync(topic: "sluice-spec-many", payload: "a")
    expect(b.produce_sync(topic: "sluice-spec-many", payload: "b")).to be_success
  end

  it "refuses to produce to a topic already bound to other settings in this producer, instead of using the wrong ones" do
    strict = producer.with(topic_config: { acks: "all" })
    producer.produce_sync(topic: "sluice-spec-3p", payload: "default settings bind the topic")
    expect { strict.produce_async(topic: "sluice-spec-3p", payload: "x") }
      .to raise_error(Sluice::Errors::ConfigurationInvalidError, /already bound to other topic settings/)
    expect { strict.produce_many_async([{ topic: "sluice-spec-3p", payload: "x" }]) }
      .to raise_error(Sluice::Errors::ConfigurationInvalidError)
    strict.produce_sync(topic: "sluice-spec-1p", payload: "the variant binds this one")
    expect { producer.produce_async(topic: "sluice-spec-1p", payload: "x") }
      .to raise_error(Sluice::Errors::ConfigurationInvalidError)
    expect(producer.outstanding).to eq(0)
  end

  it "runs the producer's middleware and emits its events" do
    producer.middleware.append(->(message) { message.merge(headers: { "via" => "variant" }) })
    events = record_events(producer.monitor, "message.produced_sync")
    report = producer.with(topic_config: { acks: "all" }).produce_sync(topic: "sluice-spec-many", payload: "mw")
    expect(consume_reports([report]).first[:headers]).to eq([%w[via variant]])
    expect(events.events.size).to eq(1)
  end

  it "applies only inside the variant's own calls, also with other fibers and threads producing" do
    unreachable = build_unreachable_producer
    hasty = unreachable.with(topic_config: { "message.timeout.ms": 300 })
    hasty_handle = nil
    Fiber.new { hasty_handle = hasty.produce_async(topic: "sluice-spec-1p", payload: "fast") }.resume
    plain = Thread.new { unreachable.produce_async(topic: "sluice-spec-3p", payload: "slow") }.value
    expect(hasty_handle.wait(raise_response_error: false).error.code).to eq(:msg_timed_out)
    expect(plain).to be_pending
    unreachable.close!
  end

  it "survives a reload of the producer's client" do
    reloading = build_producer(kafka: { "enable.idempotence": true }, reload_on_idempotent_fatal_error: true,
                               wait_backoff_on_idempotent_fatal_error: 1)
    variant = reloading.with(topic_config: { acks: "all" })
    variant.produce_sync(topic: "sluice-spec-many", payload: "before")
    break_idempotence(reloading.client, "test")
    reloaded = record_events(reloading.monitor, "producer.reloaded")
    expect(variant.produce_sync(topic: "sluice-spec-many", payload: "after")).to be_success
    expect(reloaded.events.size).to eq(1)
  end
end
