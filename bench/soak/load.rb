# frozen_string_literal: true

module Soak
  # One bit per sequence number, preallocated: what the soak remembers of
  # every message must not grow with the run, or it would measure itself.
  class Bits
    def initialize(size)
      @bytes = "\0".b * ((size / 8) + 1)
      @count = 0
    end

    attr_reader :count

    # @return [Boolean] false when it was set already
    def set(index)
      byte = @bytes.getbyte(index / 8)
      mask = 1 << (index % 8)
      return false if byte.anybits?(mask)

      @bytes.setbyte(index / 8, byte | mask)
      @count += 1
      true
    end

    def set?(index) = @bytes.getbyte(index / 8).anybits?(1 << (index % 8))
  end

  # Where each acknowledged message was placed (partition and offset, as
  # its delivery report said), in a String allocated once, like Bits.
  class Placements
    UNKNOWN = [-1, -1].pack("l<l<").freeze

    def initialize(size)
      @bytes = UNKNOWN * size
    end

    def set(index, partition, offset) = @bytes[index * 8, 8] = [partition, offset].pack("l<l<")

    # @return [Array(Integer, Integer)] partition and offset (-1: no report, or none given)
    def [](index) = @bytes[index * 8, 8].unpack("l<l<")
  end

  # One idempotent producer sending "<id>:<seq>" at a fixed rate from its own
  # thread, the send time in a header; a second thread takes the handles in
  # order and records each report, so only the messages in flight are held.
  class Source
    KEYS = 16
    TIMEOUTS = { "socket.timeout.ms": 5_000, "message.timeout.ms": 120_000 }.freeze

    attr_reader :id, :acked, :placed, :sent, :failed

    def initialize(id, per_second, capacity, mode)
      @id = id
      @per_second = per_second
      @acked = Bits.new(capacity)
      @placed = Placements.new(capacity)
      @sent = 0
      @failed = Hash.new(0)
      @handles = Queue.new
      @stop = false
      @producer = Sluice::Producer.new do |config|
        config.kafka = { "bootstrap.servers": PROXIES, "enable.idempotence": true, "linger.ms": 5 }.merge(TIMEOUTS)
        config.polling.mode = mode
        config.logger = Logger.new(nil)
        debug(config, ENV.fetch("SOAK_PRODUCER_DEBUG", nil))
      end
    end

    def start(topic)
      @checker = Thread.new { check_reports }
      @thread = Thread.new { produce(topic) }
    end

    # Stops producing and waits for every report. @return [Integer] handles never resolved
    def drain(seconds)
      @stop = true
      @thread.value
      @producer.flush(seconds * 1000)
      @handles << nil
      @checker.join(seconds) ? 0 : @handles.size
    end

    def close = @producer.close(timeout: 10_000)

    private

    def produce(topic)
      started = now
      until @stop
        due = ((now - started) * @per_second).to_i
        send_one(topic) while @sent < due && !@stop
        sleep(0.01) # pacing: the next messages fall due
      end
    end

    def send_one(topic)
      handle = @producer.produce_async(topic: topic, key: "#{@id}-#{@sent % KEYS}", payload: "#{@id}:#{@sent}",
                                       headers: { "sent" => now.to_s })
      @handles << [@sent, handle]
      @sent += 1
    end

    # SOAK_PRODUCER_DEBUG=eos,protocol (librdkafka's debug contexts): each
    # producer's librdkafka log in tmp/soak-producer-<id>.log.
    def debug(config, contexts)
      return unless contexts

      config.kafka = config.kafka.merge(debug: contexts)
      config.logger = Logger.new(File.join(ROOT, "tmp", "soak-producer-#{@id}.log"))
    end

    def check_reports
      while (item = @handles.pop)
        seq, handle = item
        report = handle.wait(max_wait_timeout: 300_000, raise_response_error: false)
        next @failed[report.error.code] += 1 unless report.success?

        @acked.set(seq)
        @placed.set(seq, report.partition || -1, report.offset || -1)
      end
    end

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # A group of two consumers reading the soak topic, each on a thread of its
  # own, recording what they were handed and how long after its produce call.
  class Sink
    SETTINGS = { "auto.offset.reset": "earliest", "session.timeout.ms": 10_000, "heartbeat.interval.ms": 1_000,
                 "socket.timeout.ms": 5_000 }.freeze

    attr_reader :seen, :duplicates, :group, :read_up_to, :errors

    def initialize(sources, capacity, mode)
      @seen = sources.to_h { |source| [source.id, Bits.new(capacity)] }
      @duplicates = 0
      @latencies = []
      @read_up_to = {} # partition => the highest offset handed out
      @errors = Hash.new(0) # "consumer <i>: <type> <code>" => count, for the autopsy
      @last_read_at = {} # consumer index => when it last handed out a message
      @lock = Mutex.new
      @group = "sluice-soak-#{SecureRandom.hex(4)}"
      @consumers = Array.new(2) { |index| consumer(index, mode) }
    end

    def start(topic)
      @consumers.each { |consumer| consumer.subscribe(topic) }
      read_on
    end

    # Ends each consumer's read and starts another: a new read drains the
    # queue before it waits, so what a reader waiting for a wake-up that
    # never came had left unread is read now (the autopsy's test of that).
    def restart_readers
      @consumers.each(&:stop)
      @threads.each(&:join)
      read_on
    end

    # Which consumers hold the partition now, and whether their reading thread still runs.
    def owners(topic, partition)
      @consumers.each_index.filter_map do |index|
        next unless @consumers[index].assignment.fetch(topic, []).include?(partition)

        idle = @last_read_at[index] && (Process.clock_gettime(Process::CLOCK_MONOTONIC) - @last_read_at[index]).round(1)
        "consumer #{index} (last message: #{idle ? "#{idle} s ago" : "never"}#{"; its thread ended" unless @threads[index].alive?})"
      end
    end

    def read = @seen.values.sum(&:count)

    # The latencies (s) recorded since the last call.
    def take_latencies = @lock.synchronize { @latencies.tap { @latencies = [] } }

    # Waits until every acknowledged message was read (or seconds passed).
    def catch_up(sources, seconds)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
      sleep(0.2) until lost(sources).zero? || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline # polls progress
    end

    # Acknowledged and never read.
    def lost(sources) = missing(sources).size

    # The payloads of what was acknowledged and never read.
    def missing(sources)
      sources.flat_map do |source|
        seen = @seen.fetch(source.id)
        (0...source.sent).filter_map { |seq| "#{source.id}:#{seq}" if source.acked.set?(seq) && !seen.set?(seq) }
      end
    end

    def close
      @consumers.each(&:stop)
      @threads.each(&:join)
      @consumers.each { |consumer| consumer.close(timeout: 10_000) }
    end

    private

    def read_on
      @threads = @consumers.each_with_index.map do |consumer, index|
        Thread.new { consumer.each_message { |message| record(message, index) } }
      end
    end

    def consumer(index, mode)
      consumer = Sluice::Consumer.new do |config|
        config.kafka = { "bootstrap.servers": PROXIES, "group.id": @group }.merge(SETTINGS)
        config.polling.mode = mode
        config.logger = Logger.new(nil)
      end
      consumer.monitor.subscribe("error.occurred") do |event|
        error = event[:error]
        @lock.synchronize { @errors["consumer #{index}: #{event[:type]} #{error.respond_to?(:code) ? error.code : error.class}"] += 1 }
      end
      consumer
    end

    def record(message, index)
      latency = Process.clock_gettime(Process::CLOCK_MONOTONIC) - Float(message.headers.fetch("sent"))
      id, seq = message.payload.split(":").map { |part| Integer(part) }
      @lock.synchronize do
        @duplicates += 1 unless @seen.fetch(id).set(seq)
        @read_up_to[message.partition] = message.offset if message.offset > @read_up_to.fetch(message.partition, -1)
        @last_read_at[index] = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        @latencies << latency
      end
    end
  end

  # The soak's producers and consumers together.
  class Load
    attr_reader :sources, :sink

    def initialize(topic, options)
      @topic = topic
      per_second = options[:rate].fdiv(options[:producers])
      # Room for every sequence number the run can reach, catching up after stalls included.
      capacity = (per_second * 60 * (options[:minutes] + 1) * 1.2).ceil
      @sources = Array.new(options[:producers]) { |id| Source.new(id, per_second, capacity, options[:mode]) }
      @sink = Sink.new(@sources, capacity, options[:mode])
    end

    def start
      @sink.start(@topic)
      @sources.each { |source| source.start(@topic) }
    end

    def sent = @sources.sum(&:sent)

    def acked = @sources.sum { |source| source.acked.count }

    def lag = [acked - @sink.read, 0].max

    # Stops producing, waits for every report and for the consumers to read
    # every acknowledged message. @return [Hash] the run's totals
    def drain(seconds = 120)
      unresolved = @sources.sum { |source| source.drain(seconds) }
      @sink.catch_up(@sources, seconds)
      failed = @sources.map(&:failed).reduce({}) { |all, one| all.merge(one) { |_, a, b| a + b } }
      missing = @sink.missing(@sources)
      autopsy = missing.empty? ? [] : Autopsy.new(@topic, @sink.group, DIRECT).call(missing, @sink, @sources)
      { sent: sent, acked: acked, read: @sink.read, lost: missing.size, duplicated: @sink.duplicates,
        failed: failed.values.sum, failed_codes: failed, unresolved: unresolved, consumer_errors: @sink.errors.dup,
        lost_messages: autopsy, read_after_restart: missing.empty? ? 0 : read_after_restart(missing.size) }
    end

    # Messages still missing after the drain: are they read once the readers
    # start again (they waited for a wake-up that never came), or never?
    # @return [Integer] how many of them were read then
    def read_after_restart(missing)
      @sink.restart_readers
      @sink.catch_up(@sources, 15)
      missing - @sink.lost(@sources)
    end

    def close
      @sink.close
      @sources.each(&:close)
    end
  end
end
