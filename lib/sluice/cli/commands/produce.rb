# frozen_string_literal: true

module Sluice
  module CLI
    module Commands
      # sluice produce TOPIC: a message per line of stdin (kcat -P), every
      # delivery waited for. Exit 1 when any message failed.
      class Produce < Command
        # What `sluice` and `sluice help` say of the command.
        SUMMARY = "produce stdin's lines (or --json objects) to a topic, waiting for every delivery"
        # (see Command::ARGUMENTS)
        ARGUMENTS = "TOPIC"
        # Messages between two progress lines on stderr.
        DEFAULT_PROGRESS = 100_000

        # -K, -H, -p, -Z, --json, --progress.
        def define(parser)
          @headers = {}
          @progress = DEFAULT_PROGRESS
          parser.on("-K", "--key-delimiter DELIM", "the key is what comes before the first DELIM of a line") { |delim| @key_delimiter = delim }
          parser.on("-H", "--header NAME=VALUE", "a header on every message (repeatable)") { |pair| header(pair) }
          parser.on("-p", "--partition N", "to this partition (default: by key, or spread)") { |n| @partition = partition(n) }
          parser.on("-Z", "--null", "with -K: an empty key or value is sent as NULL (an empty value: a tombstone)") { @null = true }
          parser.on("--json", 'each line is {"key":, "value":, "headers": {}, "partition":} (a null value: a tombstone)') { @json = true }
          parser.on("--progress N", "a progress line on stderr every N messages (default #{DEFAULT_PROGRESS}; 0: none)") do |n|
            @progress = n == "0" ? 0 : positive_integer(n, "--progress")
          end
        end

        # @return [Integer, nil] FAILED when a message failed
        def run(topic)
          raise UsageError, "-K and --json do not go together: a JSON line names its key" if @key_delimiter && @json

          input = InputLine.new(topic: topic, json: @json, key_delimiter: @key_delimiter, headers: @headers, partition: @partition, null: @null)
          deliveries = Deliveries.new(@io.stderr, progress: @progress, wait_ms: wait_ms)
          with_producer { |producer| send_all(producer, input, deliveries) }
          warn_line(deliveries.summary(topic))
          deliveries.failed? ? FAILED : nil
        end

        private

        def send_all(producer, input, deliveries)
          @io.stdin.binmode
          @io.stdin.each_line.with_index(1) do |line, number|
            message = input.message(line) or next # an empty line
            deliveries.add(producer.produce_async(message))
          rescue ArgumentError, Errors::MessageInvalidError, Errors::ProduceError => e
            deliveries.refused("line #{number}", e)
          end
          deliveries.finish
        end

        # A failed delivery is reported after message.timeout.ms (the
        # command's --timeout, unless -X sets it): the wait for a report is
        # longer, so each message ends delivered or failed, never unknown.
        def with_producer
          producer = Producer.new do |config|
            config.kafka = { "message.timeout.ms" => @options.timeout_ms }.merge(@options.kafka)
            config.max_wait_timeout = wait_ms
            config.logger = logger
          end
          yield producer
        ensure
          producer&.close
        end

        def wait_ms
          configured = Integer(@options.kafka.fetch("message.timeout.ms", @options.timeout_ms), exception: false) || @options.timeout_ms
          configured + 5_000
        end

        def header(pair)
          name, value = pair.split("=", 2)
          raise UsageError, "-H takes NAME=VALUE, got #{pair.inspect}" if value.nil? || name.empty?

          @headers[name] = value
        end
      end
    end
  end
end
