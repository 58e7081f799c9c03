# frozen_string_literal: true

require "securerandom"

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

        # -o, -c, -e, -f, -J, -K, -D, -Z, -u, -p, -G.
        def define(parser)
          @start = StartOffset.parse("end")
          @format = "value"
          @delimiter = "\n"
          parser.on("-o", "--offset OFFSET", "beginning, end (default), stored, OFFSET, -N (N before the end), s@TIME") do |text|
            @start = StartOffset.parse(text)
          end
          parser.on("-c", "--count COUNT", "exit after COUNT messages") { |n| @count = positive_integer(n, "-c") }
          parser.on("-e", "--exit-at-end", "exit once every partition's end is reached") { @exit_at_end = true }
          parser.on("-f", "--format FORMAT", "value (default), json, or a kcat format string: %s value, %k key, %t topic,",
                    "%p partition, %o offset, %T timestamp, %h headers, %S/%K sizes, %R, \\n \\t \\xHH") { |f| @format = f }
          parser.on("-J", "--json", "the json format (kcat's -J)") { @format = "json" }
          parser.on("-K", "--key-delimiter DELIM", "value format: print the key and DELIM before the value") { |delim| @key_delimiter = delim }
          parser.on("-D", "--delimiter DELIM", "value and json formats: what follows each message (default \\n)") { |delim| @delimiter = delim }
          parser.on("-Z", "--null", "print a NULL key or value as NULL (default: nothing)") { @null = true }
          parser.on("-u", "--unbuffered", "write each message out at once (default: after each batch read)") { @unbuffered = true }
          parser.on("-p", "--partition N", "this partition only (repeatable)") { |n| (@partitions ||= []) << partition(n) }
          parser.on("-G", "--group GROUP", "read as a member of GROUP (subscribe, commit) instead of by assignment") { |group| @group = group }
        end

        # @return [Integer, nil] 128 + n when signal n stopped it
        def run(topic)
          format = MessageFormat.new(@format, key_delimiter: @key_delimiter, delimiter: @delimiter, null: @null == true)
          check_group_options!
          consumer = new_consumer
          render_natively(consumer, format)
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
            config.kafka = consumer_settings.merge(kafka)
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

        # Output is flushed after each batch read (kcat flushes on exit and
        # when its buffer fills): a message is on stdout as soon as nothing
        # more is waiting. -c and -u print one message at a time: -c so that
        # a group commits only what was printed, -u to flush each.
        def print_messages(consumer, format)
          return consumer.each_batch { |batch| print_batch(batch, format) } unless @count || @unbuffered

          printed = 0
          consumer.each_message do |message|
            print_batch([message], format)
            consumer.stop if @count && (printed += 1) >= @count
          end
        end

        # The batches of each_batch come rendered by the consumer when the
        # format allows (no %h, not json): each message of a batch is a run
        # of messages of one partition, its payload their output (issue 58).
        def render_natively(consumer, format)
          ops = format.native_ops unless @count || @unbuffered
          return unless ops

          consumer.render_batches(ops, null: format.null)
          @rendered = true
        end

        def print_batch(messages, format)
          @rendered ? @io.stdout.write(*messages.map(&:payload)) : @io.stdout.write(format.render_all(messages))
          @io.stdout.flush
          messages.each { |message| came_after_end(message) } if @reached
        end

        # -e: partitions whose end was reached (partition => the end's
        # offset) and nothing came after; the read stops once that is every
        # assigned one. A batch can hold a partition's last messages and its
        # end both: only a message at or past the end un-reaches it.
        def stop_at_end(consumer)
          @reached = {}
          consumer.monitor.subscribe("consumer.partition_eof") do |event|
            @reached[event[:partition]] = event[:offset]
            consumer.stop if @reached.size >= consumer.assignment.values.sum(&:size)
          end
        end

        def came_after_end(message)
          ended = @reached[message.partition]
          @reached.delete(message.partition) if ended && message.offset >= ended
        end
      end
    end
  end
end
