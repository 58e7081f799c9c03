# frozen_string_literal: true

module Soak
  # A fault every `every` seconds, rotating over the kinds of spec/cluster/
  # network_faults_spec.rb, each OUTAGE seconds long: slow links on every
  # node, the leader of partition 0 blackholed, its connections refused, a
  # reset storm on every node. The sleeps here are the schedule itself.
  class Faults
    OUTAGE = 8 # s
    KINDS = %i[slow blackhole refuse reset].freeze

    def initialize(topic, direct, every)
      @topic = topic
      @direct = direct
      @every = every
      @next_at = now + every
      @count = 0
      @minute = []
    end

    # Runs the faults that fall due before `deadline` and fit before it, then
    # waits for it.
    def run_until(deadline)
      while @next_at + OUTAGE + 2 < deadline
        pause_until(@next_at)
        @minute << inject(KINDS[@count % KINDS.size])
        @count += 1
        @next_at += @every
      end
      pause_until(deadline)
    end

    # The faults since the last call.
    def during_minute = @minute.tap { @minute = [] }

    private

    def inject(kind)
      nodes = %i[slow reset].include?(kind) ? Toxiproxy::NODES : [leader]
      fault = Toxiproxy::Faults.public_send(kind, nodes)
      kind == :reset ? storm(fault) : Toxiproxy.with(fault) { sleep(OUTAGE) }
      fault.to_s
    end

    # Five resets, 0.3 s each, a second apart (about OUTAGE seconds in all).
    def storm(fault)
      5.times do
        Toxiproxy.with(fault) { sleep(0.3) }
        sleep(1.2)
      end
    end

    def leader
      admin = Sluice::Admin.new do |config|
        config.kafka = { "bootstrap.servers": @direct }
        config.logger = Logger.new(nil)
      end
      admin.describe_topic(@topic)[:partitions].find { |partition| partition[:partition].zero? }.fetch(:leader)
    ensure
      admin&.close
    end

    def pause_until(time)
      left = time - now
      sleep(left) if left.positive?
    end

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end
