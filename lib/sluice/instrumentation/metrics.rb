# frozen_string_literal: true

module Sluice
  module Instrumentation
    # What the metrics listeners (PrometheusListener, StatsdListener) report,
    # in one place: librdkafka's statistics and sluice's events turned into
    # samples, each a name (WaterDrop's Datadog name where it has one), a type
    # and a value with its tags. A backend only writes them out.
    #
    # A count is the increase since the previous sample of the same series,
    # worked out here from librdkafka's running totals (not from the _d keys,
    # which are 0 at the first emission and would lose what came before it).
    class Metrics
      # type: :count (an increase), :gauge or :timing (ms); tags: Symbol => String
      Sample = Struct.new(:type, :name, :value, :tags)

      # One number of librdkafka's statistics: where it is (a key path) and what it becomes.
      Stat = Struct.new(:type, :name, :path, :help)

      # Numbers of the client as a whole (the top level of the statistics), tagged client_id and kind.
      ROOT = [
        Stat.new(:count, "calls", %w[tx], "requests sent to brokers"),
        Stat.new(:gauge, "queue.size", %w[msg_cnt], "messages in the producer queue (not yet delivered)"),
        Stat.new(:gauge, "queue.bytes", %w[msg_size], "bytes of the messages in the producer queue"),
        Stat.new(:count, "messages.sent", %w[txmsgs], "messages sent to brokers"),
        Stat.new(:count, "messages.sent.bytes", %w[txmsg_bytes], "bytes of the messages sent to brokers"),
        Stat.new(:count, "messages.consumed", %w[rxmsgs], "messages fetched from brokers"),
        Stat.new(:count, "messages.consumed.bytes", %w[rxmsg_bytes], "bytes of the messages fetched from brokers")
      ].freeze

      # Numbers of each broker the client talks to (no bootstrap or logical entries), tagged broker: its node name.
      BROKER = [
        Stat.new(:count, "deliver.attempts", %w[txretries], "requests retried"),
        Stat.new(:count, "deliver.errors", %w[txerrs], "requests that failed to be sent"),
        Stat.new(:count, "receive.errors", %w[rxerrs], "responses that failed to be received"),
        Stat.new(:count, "connection.connects", %w[connects], "connections made"),
        Stat.new(:count, "connection.disconnects", %w[disconnects], "connections lost or closed"),
        Stat.new(:gauge, "outbuf.requests", %w[outbuf_cnt], "requests waiting to be sent"),
        Stat.new(:gauge, "outbuf.messages", %w[outbuf_msg_cnt], "messages in the requests waiting to be sent"),
        Stat.new(:gauge, "queue.latency.avg", %w[outbuf_latency avg], "time a request waits to be sent, average (µs)"),
        Stat.new(:gauge, "queue.latency.p95", %w[outbuf_latency p95], "time a request waits to be sent, 95th percentile (µs)"),
        Stat.new(:gauge, "queue.latency.p99", %w[outbuf_latency p99], "time a request waits to be sent, 99th percentile (µs)"),
        Stat.new(:gauge, "network.latency.avg", %w[rtt avg], "broker round-trip time, average (µs)"),
        Stat.new(:gauge, "network.latency.p95", %w[rtt p95], "broker round-trip time, 95th percentile (µs)"),
        Stat.new(:gauge, "network.latency.p99", %w[rtt p99], "broker round-trip time, 99th percentile (µs)")
      ].freeze

      # Only partitions this consumer fetches (see #fetched?).
      PARTITION = [
        Stat.new(:gauge, "consumer.lags", %w[consumer_lag_stored], "messages between the partition's end and the stored offset"),
        Stat.new(:gauge, "consumer.fetch_queue.messages", %w[fetchq_cnt], "messages fetched, not yet handed out"),
        Stat.new(:gauge, "consumer.fetch_queue.bytes", %w[fetchq_size], "bytes of the messages fetched, not yet handed out")
      ].freeze

      # The metrics made from sluice's events rather than from statistics: name => [type, help].
      EVENTS = {
        "error_occurred" => [:count, "error.occurred events, by type"],
        "acknowledged" => [:count, "messages delivered (message.acknowledged; only with deliveries: true)"],
        "purged" => [:count, "messages purged before delivery"],
        "consumer.assigned" => [:count, "partitions assigned to the consumer by rebalances"],
        "consumer.revoked" => [:count, "partitions revoked from the consumer by rebalances"],
        "consumer.retries" => [:count, "blocks run again after they raised (retries:), by source topic"],
        "consumer.dead_letters" => [:count, "messages produced to a dead-letter topic (dead_letter:), by source topic"],
        "transaction.time" => [:timing, "how long a transaction took (ms)"],
        "polling.budget_exceeded" => [:count, "polling turns max_time cut short, work left for the next (poller.budget_exceeded)"]
      }.freeze

      # name => help, for every metric (a backend that must describe a metric asks here)
      HELP = (ROOT + BROKER + PARTITION).to_h { |stat| [stat.name, stat.help] }.merge(EVENTS.transform_values(&:last)).freeze
      # name => :count, :gauge or :timing, for every metric
      TYPES = (ROOT + BROKER + PARTITION).to_h { |stat| [stat.name, stat.type] }.merge(EVENTS.transform_values(&:first)).freeze

      # The event keys that name a client, and what each makes the kind tag.
      ID_KEYS = { producer_id: "producer", consumer_id: "consumer", admin_id: "admin" }.freeze

      def initialize
        @mutex = Mutex.new
        @totals = {} # client id => { [name, tags] => last total }
      end

      # A `statistics.emitted` event's samples: ROOT's, BROKER's per broker and
      # (a consumer's) PARTITION's per partition fetched; a count is the
      # increase since this client's previous emission.
      # @return [Array<Sample>]
      def statistics(event)
        stats = event[:statistics]
        base = { client_id: client_id(event), kind: stats["type"].to_s }
        samples = ROOT.map { |stat| sample(stat, stats, base) }
        brokers(stats) { |broker| samples.concat(BROKER.map { |stat| sample(stat, broker, base.merge(broker: broker["nodename"])) }) }
        partitions(stats) do |topic, id, partition|
          samples.concat(PARTITION.map { |stat| sample(stat, partition, base.merge(topic: topic, partition: id)) })
        end
        samples.compact
      end

      # `error.occurred`: error_occurred, 1, tagged with the error's type.
      def error(event) = [Sample.new(:count, "error_occurred", 1, tags(event).merge(type: event[:type].to_s))]
      # `message.acknowledged`: acknowledged, 1, tagged with the topic.
      def acknowledged(event) = [Sample.new(:count, "acknowledged", 1, tags(event).merge(topic: event[:topic].to_s))]
      # `message.purged`: purged, 1, tagged with the topic.
      def purged(event) = [Sample.new(:count, "purged", 1, tags(event).merge(topic: event[:topic].to_s))]
      # `consumer.partitions_assigned`: consumer.assigned, the partitions assigned, per topic.
      def assigned(event) = rebalanced("consumer.assigned", event)
      # `consumer.partitions_revoked`: consumer.revoked, the partitions revoked, per topic.
      def revoked(event) = rebalanced("consumer.revoked", event)
      # `consumer.retry`: consumer.retries, 1, tagged with the source topic.
      def retried(event) = [Sample.new(:count, "consumer.retries", 1, tags(event).merge(topic: event[:topic].to_s))]
      # `consumer.dead_lettered`: consumer.dead_letters, the messages dead-lettered, tagged with the source topic.
      def dead_lettered(event) = [Sample.new(:count, "consumer.dead_letters", event[:count], tags(event).merge(topic: event[:topic].to_s))]
      # `transaction.finished`: transaction.time, how long it took (ms).
      def transaction(event) = [Sample.new(:timing, "transaction.time", event[:time].to_f, tags(event))]
      # `poller.budget_exceeded`: polling.budget_exceeded, 1.
      def budget_exceeded(event) = [Sample.new(:count, "polling.budget_exceeded", 1, tags(event))]

      # A closed client's totals are forgotten (a long-lived process makes many).
      def closed(event)
        @mutex.synchronize { @totals.delete(client_id(event)) }
        []
      end

      private

      def rebalanced(name, event)
        event[:partitions].map { |topic, partitions| Sample.new(:count, name, partitions.size, tags(event).merge(topic: topic)) }
      end

      def sample(stat, scope, tags)
        value = scope.dig(*stat.path)
        return unless value.is_a?(Numeric)

        value = increase(stat.name, tags, value) if stat.type == :count
        Sample.new(stat.type, stat.name, value, tags)
      end

      # The series' increase since its previous total; a total that went down
      # belongs to a new librdkafka handle (a reloaded producer) and counts whole.
      def increase(name, tags, total)
        @mutex.synchronize do
          series = (@totals[tags[:client_id]] ||= {})
          last = series[[name, tags]] || 0
          series[[name, tags]] = total
          total >= last ? total - last : total
        end
      end

      # Brokers the client talks to: not the bootstrap entries (nodeid -1) nor
      # the logical ones (GroupCoordinator), which repeat a real broker's
      # numbers under the same node name.
      def brokers(stats)
        stats.fetch("brokers", {}).each_value do |broker|
          yield broker unless broker["nodeid"].to_i.negative? || %w[logical internal].include?(broker["source"])
        end
      end

      # Partitions this consumer fetches, once their lag is known (as karafka's listener).
      def partitions(stats)
        return unless stats["type"] == "consumer"

        stats.fetch("topics", {}).each do |topic, topic_stats|
          topic_stats.fetch("partitions", {}).each do |id, partition|
            yield topic, id, partition if fetched?(id, partition)
          end
        end
      end

      def fetched?(id, partition)
        id != "-1" && partition["consumer_lag_stored"] != -1 && !%w[none stopped].include?(partition["fetch_state"])
      end

      def tags(event) = { client_id: client_id(event), kind: kind(event) }

      def client_id(event) = ID_KEYS.each_key.lazy.map { |key| event[key] }.find(&:itself).to_s

      def kind(event) = ID_KEYS.find { |key, _| event[key] }&.last.to_s
    end
  end
end
