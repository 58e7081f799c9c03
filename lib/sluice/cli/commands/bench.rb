# frozen_string_literal: true

module Sluice
  module CLI
    module Commands
      # sluice bench TOPIC: a short produce run, every delivery waited for,
      # printing messages per second (kafka-producer-perf-test.sh, briefly).
      class Bench < Command
        # What `sluice` and `sluice help` say of the command.
        SUMMARY = "produce throughput: messages of a size, from one or more producers, in msg/s"
        # (see Command::ARGUMENTS)
        ARGUMENTS = "TOPIC"
        BATCH = 1_000 # messages per produce_many_async

        # --messages, --size, --producers.
        def define(parser)
          @messages = 100_000
          @size = 100
          @producers = 1
          parser.on("--messages N", "messages in all (default #{@messages})") { |n| @messages = positive_integer(n, "--messages") }
          parser.on("--size BYTES", "payload size (default #{@size})") { |n| @size = positive_integer(n, "--size") }
          parser.on("--producers N", "producers, each in a thread of its own (default #{@producers})") do |n|
            @producers = positive_integer(n, "--producers")
          end
        end

        # @return [Integer, nil] FAILED when a delivery failed
        def run(topic)
          producers = Array.new(@producers) { new_producer }
          started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
          failed = shares.each_with_index.map { |count, i| Thread.new { produce(producers[i], topic, count) } }.sum(&:value)
          elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
          out(result(elapsed, failed))
          failed.zero? ? nil : FAILED
        ensure
          producers&.each(&:close)
        end

        private

        def new_producer
          Producer.new do |config|
            config.kafka = { "message.timeout.ms" => @options.timeout_ms }.merge(kafka)
            config.max_wait_timeout = @options.timeout_ms + 5_000
            config.logger = logger
          end
        end

        # The messages split between the producers.
        def shares = Array.new(@producers) { |i| (@messages / @producers) + (i < @messages % @producers ? 1 : 0) }

        # @return [Integer] failed deliveries
        def produce(producer, topic, count)
          payload = "x" * @size
          handles = count.times.each_slice(BATCH).flat_map do |slice|
            producer.produce_many_async(slice.map { { topic: topic, payload: payload } })
          end
          handles.count { |handle| handle.wait(raise_response_error: false).error }
        end

        def result(elapsed, failed)
          rate = (@messages / elapsed).round
          megabytes = (@messages * @size / elapsed / 1_000_000.0).round(1)
          failures = ", #{failed} failed" if failed.positive?
          "#{@messages} messages of #{@size} bytes, #{@producers} producer(s): #{rate} msg/s, #{megabytes} MB/s, #{elapsed.round(2)} s#{failures}"
        end
      end
    end
  end
end
