# frozen_string_literal: true

RSpec.describe "Producers created and closed in a loop", :kafka do
  # Process-wide things (the global poller's selector, set up by the first :fd
  # producer ever; librdkafka's globals) are not leaks: one warm-up producer of
  # each mode first.
  def warm_up
    %i[fd thread].each do |mode|
      producer = build_producer(mode: mode)
      producer.produce_sync(topic: "sluice-spec-1p", payload: "warm-up")
      producer.close
    end
  end

  def snapshot = { fds: open_fds, threads: live_threads }

  # Nothing may be left over. Counts may only go *down*: another spec's
  # forgotten native handle, collected meanwhile, releases its fds.
  def expect_nothing_leaked(before)
    after = snapshot
    expect(after[:fds]).to be <= before[:fds], "#{after[:fds] - before[:fds]} file descriptor(s) leaked"
    expect(after[:threads]).to be <= before[:threads], "#{after[:threads] - before[:threads]} thread(s) leaked"
  end

  it "leak no thread and no file descriptor (30 producers that each delivered a message)" do
    warm_up
    before = snapshot
    during = []

    30.times do |i|
      producer = build_producer
      producer.produce_sync(topic: "sluice-spec-1p", payload: "loop-#{i}")
      during << snapshot if i.zero?
      producer.close
    end

    expect(during.first[:fds]).to be > before[:fds] # the measurement sees a live producer's fds
    expect_nothing_leaked(before)
  end

  it "leak nothing when several are open at once and closed together" do
    warm_up
    before = snapshot

    producers = Array.new(10) { build_producer }
    producers.each_with_index { |producer, i| producer.produce_async(topic: "sluice-spec-3p", payload: "together-#{i}") }
    producers.each(&:close)

    expect_nothing_leaked(before)
  end

  it "leak nothing when closed with close! while messages are stuck (unreachable broker)" do
    warm_up
    before = snapshot

    10.times do |i|
      producer = build_unreachable_producer
      handles = Array.new(5) { |j| producer.produce_async(topic: "sluice-spec-1p", payload: "stuck-#{i}-#{j}") }
      producer.close!
      expect(handles.map { |h| h.wait(raise_response_error: false).error&.code }.uniq).to eq([:purge_queue])
    end

    expect_nothing_leaked(before)
  end

  it "leak nothing with a thread-mode and an fd-mode producer side by side" do
    warm_up
    before = snapshot

    5.times do |i|
      pair = [build_producer(mode: :fd), build_producer(mode: :thread)]
      pair.each { |producer| producer.produce_sync(topic: "sluice-spec-1p", payload: "pair-#{i}") }
      pair.each(&:close)
    end

    expect_nothing_leaked(before)
  end
end
