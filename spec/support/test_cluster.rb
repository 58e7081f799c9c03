# frozen_string_literal: true

require "open3"

# The three-node cluster of the broker-failure and network-fault specs
# (spec/cluster): started, killed and restarted one node at a time by
# `bin/kafka cluster`, and read back to the end of each partition.
module TestCluster
  # Clients bootstrap through the toxiproxies (29092-29094): every connection
  # goes through a proxy, which a spec can slow down, blackhole or close.
  PROXY_PORT = Integer(ENV.fetch("KAFKA_CLUSTER_PROXY_PORT", "29092"))
  BROKERS = Array.new(3) { |i| "127.0.0.1:#{PROXY_PORT + i}" }.join(",")
  # The nodes' inter-broker listeners (19292-19294), no proxy in between:
  # what the readers that check a run's result use, so that what they see
  # does not depend on the faults being healed.
  INTERNAL_PORT = Integer(ENV.fetch("KAFKA_CLUSTER_INTERNAL_PORT", "19292"))
  DIRECT = Array.new(3) { |i| "127.0.0.1:#{INTERNAL_PORT + i}" }.join(",")
  SCRIPT = File.expand_path("../../bin/kafka", __dir__)

  class << self
    # Starts whatever is not running (nodes, toxiproxy: `bin/kafka cluster
    # start` leaves running ones alone) and waits until every partition has
    # its full ISR. Called before each spec file; one owner stops the cluster:
    # bin/test-cluster, which started it (SLUICE_CLUSTER_OWNED=1), or else
    # the process that found it down, when it exits. A spec file stopping it
    # because `status` had failed at its start (a node still restarting, or
    # toxiproxy not answering yet) took toxiproxy down under the specs
    # running after it.
    def start
      @start ||= begin
        found_running = running?
        at_exit { stop } unless found_running || ENV["SLUICE_CLUSTER_OWNED"] == "1"
        true
      end
      cluster("start")
      cluster("wait-isr")
    end

    def stop = cluster("stop")

    def running? = system(SCRIPT, "cluster", "status", out: File::NULL, err: File::NULL)

    def create_topic(name, partitions)
      cluster("topic", name, partitions.to_s)
      name
    end

    # Faster than #create_topic (no JVM to start): through the Admin API, directly.
    def create_topics(names, partitions)
      with_admin { |admin| names.each { |name| admin.create_topic(name, partitions: partitions, replication_factor: 3) } }
      names
    end

    # @return [Integer] the node leading topic/partition, asked directly (not
    # through a proxy). Asked again for up to timeout seconds while the answer
    # lacks the topic or its leader: CI once had a node answer, minutes after
    # the topic's creation and after other specs had restarted nodes, without it.
    def leader(topic, partition, timeout: 30)
      deadline = now + timeout
      with_admin do |admin|
        loop do
          found = admin.describe_topic(topic)[:partitions].find { |p| p[:partition] == partition }&.fetch(:leader)
          return found if found && found >= 0
          raise "#{topic}/#{partition} has no leader #{timeout}s on" if now > deadline

          sleep(0.2)
        rescue Sluice::Errors::AdminError => e # UnknownTopicError among them
          raise if now > deadline

          warn("TestCluster.leader(#{topic}, #{partition}): #{e.message}; asking again")
          sleep(0.2)
        end
      end
    end

    # SIGKILL, then wait until the controller has fenced the node: none of the
    # partitions it led (of the topics given) is led by it any more.
    def kill(node, topics, timeout: 60)
      cluster("kill", node.to_s)
      deadline = now + timeout
      until fenced?(node, topics)
        raise "node #{node} still leads partitions of #{topics.join(", ")} #{timeout}s after SIGKILL" if now > deadline

        sleep(0.2)
      end
    end

    # No partition of the topics is led by node or leaderless; false while the metadata cannot be read
    # (every node asked may still be electing).
    def fenced?(node, topics)
      topics.all? { |topic| (leaders(topic).values & [node, -1]).empty? }
    rescue Sluice::Errors::AdminError
      false
    end

    # Starts the node again and waits until every partition has its full ISR.
    def restart(node) = cluster("restart", node.to_s)

    # @return [Hash{Integer => Integer}] partition => leading node id (-1: none), asked directly through the
    # Admin API, not a JVM's kafka-topics started for each call (#kill asks every 0.2 s)
    def leaders(topic)
      with_admin { |admin| admin.describe_topic(topic)[:partitions].to_h { |p| [p[:partition], p[:leader]] } }
    end

    # The __transaction_state partition (so the coordinator) of a
    # transactional.id: Kafka's abs(String#hashCode) % partition count; of a
    # group.id: its __consumer_offsets partition's (topic "__consumer_offsets").
    def coordinator(transactional_id, topic = "__transaction_state")
      states = leaders(topic)
      hash = transactional_id.encode("UTF-16BE").unpack("n*").reduce(0) { |h, c| ((h * 31) + c) & 0xffffffff }
      hash -= 1 << 32 if hash >= 1 << 31
      states.fetch(hash == -(1 << 31) ? 0 : hash.abs % states.size)
    end

    # Every message of topic/partition, from the beginning to the end (the
    # partition's EOF: with read_committed, its last stable offset).
    # @return [Array<Array(Integer, String)>] [offset, payload] in log order
    def read_partition(topic, partition, isolation:, timeout: 60)
      read_messages(topic, partition, isolation: isolation, timeout: timeout).map { |message| [message.offset, message.payload] }
    end

    # The same, the messages whole (their headers too).
    # @return [Array<Sluice::Message>]
    def read_messages(topic, partition, isolation:, timeout: 60)
      consumer = Sluice::Consumer.new do |config|
        config.kafka = { "bootstrap.servers": DIRECT, "group.id": "sluice-cluster-spec-#{rand(1 << 30)}",
                         "enable.auto.commit": false, "isolation.level": isolation, "enable.partition.eof": true }
        config.logger = Logger.new(nil)
      end
      at_end = false
      consumer.monitor.subscribe("consumer.partition_eof") { at_end = true }
      consumer.assign(topic => { partition => -2 }) # from the beginning
      read_to_eof(consumer, -> { at_end }, timeout)
    ensure
      consumer&.close
    end

    # The partition's last stable offset: where a read_committed reader's
    # partition ends (before the first record of the earliest open
    # transaction; the high watermark when none is open).
    def last_stable_offset(topic, partition)
      consumer = Sluice::Consumer.new do |config|
        config.kafka = { "bootstrap.servers": DIRECT, "group.id": "sluice-cluster-spec-#{rand(1 << 30)}", "isolation.level": "read_committed" }
        config.logger = Logger.new(nil)
      end
      consumer.query_watermark_offsets(topic, partition).last # ListOffsets at the consumer's isolation level
    ensure
      consumer&.close
    end

    # What each node's copy of topic/partition holds at offset, read from its
    # files (Kafka's DumpLogSegments): the batch there (producer id and
    # epoch), that producer's next transaction marker after it, and the
    # entries of the node's aborted-transaction index that cover the offset
    # for that producer. Tells an input copied in a transaction that was
    # aborted from one whose transaction committed but that a node's index
    # calls aborted, and from one a reader missed. One line per node.
    # @return [Array<String>]
    def log_autopsy(topic, partition, offset)
      Array.new(3) do |i|
        dir = File.join(ROOT, "tmp/kafka/cluster-#{i + 1}/data/#{topic}-#{partition}")
        "node #{i + 1}: #{Dir.exist?(dir) ? node_autopsy(dir, offset) : "no copy"}"
      rescue StandardError => e
        "node #{i + 1}: no autopsy (#{e.class}: #{e.message.lines.first&.strip})"
      end
    end

    private

    ROOT = File.expand_path("../..", __dir__)

    def node_autopsy(dir, offset)
      batches = log_batches(dump_log(Dir[File.join(dir, "*.log")].sort, "--deep-iteration", "--print-data-log"))
      batch = batches.find { |candidate| candidate[:first] <= offset && offset <= candidate[:last] }
      return "offset #{offset} not in its log" unless batch

      marker = batches.find { |later| later[:marker] && later[:producer] == batch[:producer] && later[:first] > offset }
      aborted = aborted_entries(dir, batch[:producer], offset)
      "offset #{offset} in batch #{batch[:first]}-#{batch[:last]} of producer #{batch[:producer]} epoch #{batch[:epoch]}; " \
        "its next marker: #{marker ? "#{marker[:marker]} at #{marker[:first]} (epoch #{marker[:epoch]})" : "none"}; " \
        "aborted-index entries covering it: #{aborted.empty? ? "none" : aborted.join(", ")}"
    end

    # [{first:, last:, producer:, epoch:, marker: "COMMIT", "ABORT" or nil}] in log order
    def log_batches(dump)
      dump.each_line.with_object([]) do |line, batches|
        if line.start_with?("baseOffset:")
          fields = line.scan(/(\w+): (\S+)/).to_h
          batches << { first: Integer(fields["baseOffset"]), last: Integer(fields["lastOffset"]), producer: fields["producerId"],
                       epoch: fields["producerEpoch"], marker: nil }
        elsif (kind = line[/endTxnMarker: (\w+)/, 1])
          batches.last[:marker] = kind
        end
      end
    end

    # The node's aborted-transaction index entries of producer that cover offset: ["first-last", ...]
    def aborted_entries(dir, producer, offset)
      dump_log(Dir[File.join(dir, "*.txnindex")].sort).lines.filter_map do |line|
        entry = line.scan(/(\w+): (\S+)/).to_h
        next unless entry["producerId"] == producer && (Integer(entry["firstOffset"])..Integer(entry["lastOffset"])).cover?(offset)

        "#{entry["firstOffset"]}-#{entry["lastOffset"]}"
      end
    end

    def dump_log(files, *options)
      return "" if files.empty?

      libs = File.join(ROOT, "tmp/kafka/libs", TestKafka::VERSION.to_s, "*") # the nodes' (bin/kafka's KAFKA_VERSION)
      tool = TestKafka::VERSION >= Gem::Version.new("4.0") ? "org.apache.kafka.tools.DumpLogSegments" : "kafka.tools.DumpLogSegments" # moved in 4.0
      output, status = Open3.capture2("java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", libs,
                                      tool, *options, "--files", files.join(","), err: File::NULL)
      raise "DumpLogSegments failed on #{files.first}" unless status.success?

      output
    end

    def with_admin
      admin = Sluice::Admin.new do |config|
        config.kafka = { "bootstrap.servers": DIRECT }
        config.logger = Logger.new(nil)
      end
      yield admin
    ensure
      admin&.close
    end

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

    def read_to_eof(consumer, at_end, timeout)
      deadline = now + timeout
      messages = []
      while now < deadline
        message = consumer.poll(500)
        messages << message if message
        return messages if at_end.call
      end
      raise "no end of partition within #{timeout}s (#{messages.size} messages read)"
    end

    def cluster(*args)
      output, status = Open3.capture2e(SCRIPT, "cluster", *args)
      raise "bin/kafka cluster #{args.join(" ")} failed:\n#{output}" unless status.success?

      output
    end
  end
end
