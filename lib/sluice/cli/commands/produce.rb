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
        # Signals that interrupt it (the exit code is then 128 + the signal's number).
        SIGNALS = %w[INT TERM].freeze

        # -K, -k, -H, -p, -Z, -D, -c, -T, -z, --file, --json, --progress.
        def define(parser)
          @headers = {}
          @progress = DEFAULT_PROGRESS
          @delimiter = "\n"
          parser.on("-K", "--key-delimiter DELIM", "the key is what comes before the first DELIM of a line") { |delim| @key_delimiter = delim }
          parser.on("-k", "--key KEY", "the key of every line that names none (-K's key wins)") { |key| @key = key }
          parser.on("-H", "--header NAME=VALUE", "a header on every message (repeatable; NAME alone: a NULL value)") { |pair| header(pair) }
          parser.on("-p", "--partition N", "to this partition (default: by key, or spread)") { |n| @partition = partition(n) }
          parser.on("-Z", "--null", "with -K: an empty key or value is sent as NULL (an empty value: a tombstone)") { @null = true }
          parser.on("-D", "--delimiter DELIM", "what ends a message in the input (default \\n; kcat's escapes: \\t \\xHH ...)") do |delim|
            @delimiter = Escapes.parse(delim)
          end
          parser.on("-c", "--count COUNT", "stop after COUNT messages") { |n| @count = positive_integer(n, "-c") }
          parser.on("-T", "--tee", "write each message's input line to stdout once it is sent") { @tee = true }
          parser.on("-z", "--compression CODEC", "compress: gzip, snappy, lz4, zstd (compression.codec)") { |codec| @compression = codec }
          parser.on("--file FILE", "read FILE instead of stdin (kcat's -l FILE)") { |path| @file = path }
          parser.on("--json", 'each line is {"key":, "value":, "headers": {}, "partition":} (a null value: a tombstone)') { @json = true }
          parser.on("--progress N", "a progress line on stderr every N messages (default #{DEFAULT_PROGRESS}; 0: none)") do |n|
            @progress = n == "0" ? 0 : positive_integer(n, "--progress")
          end
        end

        # @return [Integer, nil] FAILED when a message failed; 128 + n when signal n interrupted it
        def run(topic)
          input = input_line(topic)
          deliveries = (plain_lines? ? LineDeliveries : Deliveries).new(@io.stderr, progress: @progress, wait_ms: wait_ms)
          with_input do |input_io|
            with_producer { |producer| maskable_signals { send_any(producer, input_io, input, topic, deliveries) } }
          end
          warn_line(deliveries.summary(topic))
          deliveries.failed? ? FAILED : nil
        rescue Interrupted => e
          deliveries.interrupted_summary(topic, e.signal, e.lines).each { |line| warn_line(line) }
          128 + Signal.list.fetch(e.signal)
        end

        private

        # A signal during a produce, once what was sent is settled (Produce#interrupted).
        class Interrupted < StandardError
          # The signal's name, and the input lines read before it.
          attr_reader :signal, :lines

          def initialize(signal, lines)
            @signal = signal
            @lines = lines
            super("interrupted by SIG#{signal}")
          end
        end

        # Ruby raises SIGINT's Interrupt on the spot, past
        # Thread.handle_interrupt; raised through Thread#raise instead, it
        # waits for the end of a deferred step like SIGTERM's does.
        def maskable_signals
          previous = SIGNALS.to_h { |name| [name, trap(name) { Thread.main.raise(name == "INT" ? Interrupt.new : SignalException.new(name)) }] }
          yield
        ensure
          previous&.each { |name, handler| trap(name, handler) }
        end

        def input_line(topic)
          raise UsageError, "-K and --json do not go together: a JSON line names its key" if @key_delimiter && @json
          raise UsageError, "-D takes a delimiter of at least one byte" if @delimiter.empty?

          InputLine.new(topic: topic, json: @json, key_delimiter: @key_delimiter && Escapes.parse(@key_delimiter), headers: @headers,
                        partition: @partition, null: @null, key: @key, delimiter: @delimiter)
        end

        def send_any(producer, input_io, input, topic, deliveries)
          return send_all(producer, input_io, input, deliveries) unless plain_lines?

          send_lines(producer, input_io, topic, deliveries)
        end

        # Each line the whole message (no -K, -k, -H, --json) and no -T: the
        # lines go to librdkafka from the input's chunks
        # (Producer#produce_lines), no Ruby object a line (issue 58).
        def plain_lines? = !@json && !@key_delimiter && !@key && @headers.empty? && !@tee

        # send_all's steps for plain lines: a chunk of whole lines at a time,
        # signals deferred while it is sent and counted.
        def send_lines(producer, input_io, topic, deliveries)
          @lines = 0
          reader = InputReader.new(input_io, @delimiter)
          while !done?(deliveries) && (chunk = reader.next_chunk)
            Thread.handle_interrupt(Deliveries::DEFERRED) { send_chunk(producer, topic, chunk, deliveries) }
          end
          deliveries.finish(producer)
        rescue SignalException => e
          interrupted(producer, deliveries, e, @lines)
        end

        # A refused line is counted as failed and skipped, as send_all does.
        def send_chunk(producer, topic, chunk, deliveries)
          offset = 0
          while offset < chunk.bytesize && !done?(deliveries)
            offset, line, sent, error = producer.produce_lines(topic, chunk, **line_options(offset, deliveries))
            @lines = line - 1
            deliveries.add(sent, producer)
            next unless error

            deliveries.refused(@lines += 1, error, producer)
            offset = chunk.index(@delimiter, offset)&.+(@delimiter.bytesize) || chunk.bytesize
          end
        end

        def line_options(offset, deliveries)
          { delimiter: @delimiter, offset: offset, line: @lines + 1, partition: @partition || -1, max: deliveries.room(@count),
            empties: deliveries.empty_lines }
        end

        # The lines read are counted, made messages, produced and recorded
        # in one step with signals deferred: a signal lands while waiting for
        # input or for deliveries, and the lines counted are exactly those
        # whose message is accounted for (lines read but not counted yet are
        # where a rerun resumes).
        def send_all(producer, input_io, input, deliveries)
          @lines = 0
          reader = InputReader.new(input_io, @delimiter)
          while !done?(deliveries) && (records = reader.next_records)
            Thread.handle_interrupt(Deliveries::DEFERRED) { produce_all(producer, input, records, deliveries) }
            deliveries.settle_window
          end
          deliveries.finish(producer)
        rescue SignalException => e
          interrupted(producer, deliveries, e, @lines)
        end

        def done?(deliveries) = @count && deliveries.sent >= @count

        # A chunk's lines as messages, sent with one produce_many_async (one
        # native call, not one a line). Deliveries are recorded in line order:
        # a line that cannot be a message sends the batch before it first.
        def produce_all(producer, input, records, deliveries)
          batch = [] # [line number, line, message]
          records.each do |line|
            break if @count && deliveries.sent + batch.size >= @count

            number = @lines += 1
            message = input.message(line) or next # an empty line
            batch << [number, line, message]
          rescue ArgumentError => e # a --json line that is not a message
            send_batch(producer, batch, deliveries)
            deliveries.refused(number, e)
          end
          send_batch(producer, batch, deliveries)
          @io.stdout.flush if @tee
        end

        def send_batch(producer, batch, deliveries)
          return if batch.empty?

          sent(batch, producer.produce_many_async(batch.map(&:last)), deliveries)
        rescue Errors::MessageInvalidError # nothing was sent: one at a time, so the refusal names its line
          batch.each { |entry| send_one(producer, entry, deliveries) }
        rescue Errors::ProduceManyError => e # enqueued part-way: the rest one at a time, each with its own error
          sent(batch.first(e.dispatched.size), e.dispatched, deliveries)
          batch.drop(e.dispatched.size).each { |entry| send_one(producer, entry, deliveries) }
        ensure
          batch.clear
        end

        def send_one(producer, entry, deliveries)
          sent([entry], [producer.produce_async(entry.last)], deliveries)
        rescue Errors::MessageInvalidError, Errors::ProduceError => e
          deliveries.refused(entry.first, e)
        end

        def sent(batch, handles, deliveries)
          batch.zip(handles) do |(number, line, _), handle|
            deliveries.add(handle, number)
            @io.stdout.write(line) if @tee
          end
        end

        # Closes the producer within --timeout (what is still queued then is
        # purged), counts every message's outcome and raises
        # Interrupted for the summary. A second signal ends the wait.
        def interrupted(producer, deliveries, signal, lines)
          begin
            producer.close(timeout: @options.timeout_ms)
          rescue SignalException
            nil # the second signal: count what is settled now
          end
          deliveries.finish_now(producer)
          raise Interrupted.new(Signal.signame(signal.signo), lines)
        end

        def with_input
          return yield @io.stdin.binmode unless @file

          file = begin
            File.open(@file, "rb")
          rescue SystemCallError => e
            raise UsageError, "cannot read #{@file}: #{e.message.sub(/ @ \w+ - .*/, "")}"
          end
          begin
            yield file
          ensure
            file.close
          end
        end

        # A failed delivery is reported after message.timeout.ms (the
        # command's --timeout, unless -X sets it): the wait for a report is
        # longer, so each message ends delivered or failed, never unknown.
        def with_producer
          producer = Producer.new do |config|
            config.kafka = producer_settings.merge(kafka)
            config.max_wait_timeout = wait_ms
            config.logger = logger
          end
          yield producer
        ensure
          producer&.close
        end

        def producer_settings
          settings = { "message.timeout.ms" => @options.timeout_ms }
          settings["compression.codec"] = @compression if @compression
          settings
        end

        def wait_ms
          configured = Integer(@options.kafka.fetch("message.timeout.ms", @options.timeout_ms), exception: false) || @options.timeout_ms
          configured + 5_000
        end

        # NAME=VALUE; NAME alone is a header with a NULL value, as kcat's -H NAME.
        def header(pair)
          name, value = pair.split("=", 2)
          raise UsageError, "-H takes NAME=VALUE or NAME, got #{pair.inspect}" if name.nil? || name.empty?

          @headers[name] = value
        end
      end
    end
  end
end
