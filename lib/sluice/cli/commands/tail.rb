# frozen_string_literal: true

require "securerandom"
require "set"

module Sluice
  module CLI
    module Commands
      # sluice tail TOPIC: prints a topic's messages as they come (kcat -C).
      # Reads by assignment, outside any group, unless -G names one. Ctrl-C
      # or SIGTERM stops the read and closes the consumer: exit 130 or 143.
      class Tail < Command
        # What `sluice` and `sluice help` say of the command.
        SUMMARY = "print a topic's messages (kcat -C)"
        # (see Command::ARGUMENTS)
        ARGUMENTS = "TOPIC"
        # Signals that stop the read (the exit code is then 128 + the signal's number).
        SIGNALS = %w[INT TERM].freeze

        # -o, -c, -e, -f, -J, -K, -p, -G.
        def define(parser)
          @start = StartOffset.parse("end")
          @format = "value"
          parser.on("-o", "--offset OFFSET", "beginning, end (default), stored, OFFSET, -N (N before the end), s@TIME") do |text|
            @start = StartOffset.parse(text)
          end
          parser.on("-c", "--count COUNT", "exit after COUNT messages") { |n| @count = positive_integer(n, "-c") }
          parser.on("-e", "--exit-at-end", "exit once every partition's end is reached") { @exit_at_end = true }
          parser.on("-f", "--format FORMAT", "value (default) or json: topic, partition, offset, timestamp, key, headers, value") { |f| @format = f }
          parser.on("-J", "--json", "the json format (kcat's -J)") { @format = "json" }
          parser.on("-K", "--key-delimiter DELIM", "value format: print the key and DELIM before the value") { |delim| @key_delimiter = delim }
          parser.on("-p", "--partition N", "this partition only (repeatable)") { |n| (@partitions ||= []) << partition(n) }
          parser.on("-G", "--group GROUP", "read as a member of GROUP (subscribe, commit) instead of by assignment") { |group| @group = group }
        end

        # @return [Integer, nil] 128 + n when signal n stopped it
        def run(topic)
          format = MessageFormat.new(@format, @key_delimiter)
          check_group_options!
          consumer = new_consumer
          start(consumer, topic)
          read(consumer, format)
        ensure
          consumer&.close
        end

        private

        def check_group_options!
          return unless @group
          raise UsageError, "-p reads by assignment: it does not go with -G" if @partitions
          raise UsageError, "with -G, -o takes beginning, end or stored (the group's committed offsets come first)" unless @start.auto_offset_reset
        end

        def new_consumer
          Consumer.new do |config|
            config.kafka = consumer_settings.merge(@options.kafka)
            config.max_wait_timeout = @options.timeout_ms
            config.logger = logger
          end
        end

        # Without -G the group id is only a name librdkafka needs: nothing is committed under it.
        def consumer_settings
          settings = { "group.id" => @group || "sluice-tail-#{SecureRandom.hex(6)}", "enable.auto.commit" => !@group.nil?,
                       "enable.partition.eof" => @exit_at_end == true }
          settings["auto.offset.reset"] = @start.auto_offset_reset if @group
          settings
        end

        def start(consumer, topic)
          return consumer.subscribe(topic) if @group

          with_admin do |admin|
            partitions = admin.describe_topic(topic)[:partitions].map { |p| p[:partition] }
            partitions &= @partitions if @partitions
            raise UsageError, "topic #{topic} has no partition #{@partitions.join(", ")}" if partitions.empty?

            consumer.assign(topic => @start.offsets(partitions, admin, topic))
          end
        end

        # A signal only stops the read (Consumer#stop is safe in a trap): the
        # consumer is closed after it, outside the handler.
        def read(consumer, format)
          previous = SIGNALS.to_h { |name| [name, trap(name) { stopped_by(name, consumer) }] }
          stop_at_end(consumer) if @exit_at_end
          print_messages(consumer, format)
          @signal ? 128 + Signal.list.fetch(@signal) : nil
        ensure
          previous&.each { |name, handler| trap(name, handler) }
        end

        def stopped_by(name, consumer)
          @signal ||= name
          consumer.stop
        end

        def print_messages(consumer, format)
          printed = 0
          consumer.each_message do |message|
            @io.stdout.write("#{format.line(message)}\n")
            @io.stdout.flush
            @reached&.delete(message.partition)
            consumer.stop if @count && (printed += 1) >= @count
          end
        end

        # -e: partitions whose end was reached and nothing came after; the
        # read stops once that is every assigned one.
        def stop_at_end(consumer)
          @reached = Set.new
          consumer.monitor.subscribe("consumer.partition_eof") do |event|
            @reached << event[:partition]
            consumer.stop if @reached.size >= consumer.assignment.values.sum(&:size)
          end
        end
      end
    end
  end
end
