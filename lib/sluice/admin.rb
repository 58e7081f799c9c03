# frozen_string_literal: true

module Sluice
  # Topics, configs, consumer groups and the cluster, over librdkafka's admin API.
  #
  # @example
  #   admin = Sluice::Admin.new { |config| config.kafka = { "bootstrap.servers": "127.0.0.1:9092" } }
  #   admin.create_topic("events", partitions: 6, replication_factor: 3)
  #   admin.lag("billing") # => { "events" => { 0 => 12, ... } }
  #   admin.close
  #
  # The third kind of client on the shared engine: requests answer on the
  # client's main queue, served by the poller (:fd) or the client's own
  # polling thread (:thread), so an Admin adds no Ruby thread in :fd mode and
  # a call waiting for its result lets other fibers run. Every call is bounded
  # by max_wait_timeout; a refused call raises a named Errors::AdminError
  # carrying the KafkaError.
  class Admin
    include Shared::Clock
    include Lifecycle
    include Groups

    RESOURCE_TOPIC = 2 # rd_kafka_ResourceType_t
    RESOURCE_BROKER = 4
    RESOURCE_GROUP = 3 # a group's own settings (Kafka 4: share.auto.offset.reset of a share group)
    # rd_kafka_ConfigSource_t of settings made on the resource itself (what AlterConfigs replaces)
    DYNAMIC_SOURCE = { RESOURCE_TOPIC => 1, RESOURCE_BROKER => 2, RESOURCE_GROUP => 8 }.freeze
    TIMED_OUT = KafkaError.number_for(:timed_out)
    # librdkafka's "Local: Unknown partition" (see #watermark_offsets).
    UNKNOWN_PARTITION = KafkaError.number_for(:unknown_partition)
    SETTLE_BACKOFF = 0.05 # s between metadata or config queries while a change propagates
    # The librdkafka built against has IncrementalAlterConfigs (2.2+).
    INCREMENTAL = Native::Admin.method_defined?(:incremental_alter_configs)

    ERRORS = {
      topic_already_exists: Errors::TopicAlreadyExistsError,
      unknown_topic_or_part: Errors::UnknownTopicError,
      unknown_topic: Errors::UnknownTopicError,
      unknown_partition: Errors::UnknownTopicError,
      group_id_not_found: Errors::UnknownGroupError,
      non_empty_group: Errors::GroupNotEmptyError,
      unknown_member_id: Errors::GroupNotEmptyError, # offsets altered while members are in the group
      timed_out: Errors::AdminTimeoutError,
      request_timed_out: Errors::AdminTimeoutError,
      invalid_arg: Errors::InvalidAdminRequestError,
      invalid_partitions: Errors::InvalidAdminRequestError,
      invalid_replication_factor: Errors::InvalidAdminRequestError,
      invalid_config: Errors::InvalidAdminRequestError,
      invalid_request: Errors::InvalidAdminRequestError,
      topic_exception: Errors::InvalidAdminRequestError,
      policy_violation: Errors::InvalidAdminRequestError
    }.freeze
    private_constant :RESOURCE_TOPIC, :RESOURCE_BROKER, :DYNAMIC_SOURCE, :TIMED_OUT, :SETTLE_BACKOFF, :INCREMENTAL, :ERRORS

    # Builds the admin client and connects it: the block fills in its settings,
    # which are then validated and frozen.
    # @yieldparam config [Admin::Config]
    # @raise [Errors::ConfigurationInvalidError]
    # @example
    #   admin = Sluice::Admin.new do |config|
    #     config.kafka = { "bootstrap.servers": "127.0.0.1:9092" }
    #     config.max_wait_timeout = 10_000
    #   end
    #   admin.topics # => ["events", "orders"]
    #   admin.close
    def initialize(&)
      configure(Config.new, &)
      @requests = Requests.new
      @life.open
    end

    # Creates a topic and returns once the brokers' metadata shows every
    # partition with a leader (a produce right after it does not wait for one).
    # @param name [String, Symbol]
    # @param partitions [Integer]
    # @param replication_factor [Integer]
    # @param config [Hash] topic settings ("cleanup.policy" => "compact")
    # @return [nil]
    # @raise [ArgumentError] a name, count or setting sluice can tell is invalid
    # @raise [Errors::TopicAlreadyExistsError, Errors::InvalidAdminRequestError]
    # @raise [Errors::AdminTimeoutError] no answer, or the metadata did not show it, within max_wait_timeout
    # @example
    #   admin.create_topic("orders", partitions: 3, config: { "retention.ms" => 86_400_000 })
    def create_topic(name, partitions: 1, replication_factor: 1, config: {})
      name = topic_name(name)
      count!(partitions, "partitions")
      count!(replication_factor, "replication_factor")
      pairs = settings(config, "config")
      result = request(:create_topic, name) { |client, id, ms| client.create_topic(id, ms, name, partitions, replication_factor, pairs) }
      check_items!(:create_topic, name, result)
      await_metadata(:create_topic, name) { |found| found&.size == partitions && found.all? { |p| p[:leader] >= 0 } }
    end

    # Creates the retry topics of each_message(retry_topics: delays) for topic
    # ("orders.retry.5s", ...), with as many partitions as topic (a failed
    # message keeps its partition number there). Those that exist already
    # are left as they are: it can run at every deploy.
    # @param topic [String, Symbol] the source topic (it must exist)
    # @param delays [Array<Numeric>] seconds, ascending, as given to each_message
    # @param replication_factor [Integer]
    # @param config [Hash{String => String}] topic settings, for each of them
    # @return [Array<String>] the retry topics' names
    # @raise [ArgumentError] delays not ascending seconds > 0
    # @raise [Errors::UnknownTopicError] no such source topic
    # @example
    #   admin.create_retry_topics("orders", [5, 60, 600]) # => ["orders.retry.5s", "orders.retry.60s", "orders.retry.600s"]
    def create_retry_topics(topic, delays, replication_factor: 1, config: {})
      delays = Consumer::Failure::Settings.delays(delays)
      partitions = describe_topic(topic)[:partitions].size
      delays.map { |delay| Consumer::Failure::RetryTopics.name(topic.to_s, delay) }.each do |name|
        create_topic(name, partitions: partitions, replication_factor: replication_factor, config: config)
      rescue Errors::TopicAlreadyExistsError
        nil
      end
    end

    # Grows a topic to `total` partitions (the new total, not how many to add),
    # returning once the metadata shows them with leaders.
    # @param name [String, Symbol]
    # @param total [Integer]
    # @return [nil]
    # @raise [Errors::UnknownTopicError, Errors::InvalidAdminRequestError]
    def create_partitions(name, total)
      name = topic_name(name)
      count!(total, "total")
      check_items!(:create_partitions, name, request(:create_partitions, name) { |client, id, ms| client.create_partitions(id, ms, name, total) })
      await_metadata(:create_partitions, name) { |found| found&.size == total && found.all? { |p| p[:leader] >= 0 } }
    end

    # Deletes a topic, returning once the metadata no longer shows it.
    # @param name [String, Symbol]
    # @return [nil]
    # @raise [Errors::UnknownTopicError]
    def delete_topic(name)
      name = topic_name(name)
      check_items!(:delete_topic, name, request(:delete_topic, name) { |client, id, ms| client.delete_topic(id, ms, name) })
      await_metadata(:delete_topic, name, &:nil?)
    end

    # The cluster's topic names, sorted, without internal ones (__consumer_offsets).
    # @return [Array<String>]
    def topics = describe_all(:topics, nil)[:topics].keys.reject { |name| name.start_with?("__") }.sort

    # A topic's partitions, from metadata.
    # @param name [String, Symbol]
    # @return [Hash] { name:, partitions: [{ partition:, leader:, replicas:, isr: }] }
    # @raise [Errors::UnknownTopicError]
    def describe_topic(name)
      name = topic_name(name)
      described = describe_all(:describe_topic, name)
      partitions = described[:topics].fetch(name) do
        code = described[:errors][name]
        fail!(:describe_topic, name, code || KafkaError.number_for(:unknown_topic_or_part), code ? nil : "no topic #{name}")
      end
      { name: name, partitions: partitions }
    end

    # The cluster's id, its controller and its brokers, from metadata.
    # @return [Hash] { cluster_id:, controller_id:, brokers: [{ id:, host:, port: }] }
    def cluster = describe_all(:cluster, nil).slice(:cluster_id, :controller_id, :brokers)

    # Every setting of a topic, broker or group: { name => value } (a sensitive value is nil).
    # @param topic [String, Symbol, nil] a topic's settings (give one of topic:, broker: or group:)
    # @param broker [Integer, nil] a broker's settings, by id
    # @param group [String, nil] a group's settings (Kafka 4, e.g. a share group's share.auto.offset.reset)
    # @return [Hash{String => String, nil}]
    # @raise [ArgumentError] none or more than one of topic:, broker: and group:
    # @raise [Errors::AdminError] the broker refused (Errors::UnknownTopicError for a missing topic)
    # @example
    #   admin.describe_configs(topic: "events")["retention.ms"] # => "604800000"
    #   admin.describe_configs(broker: 1)
    def describe_configs(topic: nil, broker: nil, group: nil)
      type, name = resource(topic, broker, group)
      config_entries(type, name).to_h { |entry| entry.first(2) }
    end

    # Sets and deletes settings of a topic, broker or group, leaving the others as they are.
    # Returns once describe_configs shows the change (the broker answering it
    # applies the controller's record a few milliseconds after the alter returns).
    # (Before librdkafka 2.2, which has no IncrementalAlterConfigs, the settings
    # made on the resource are read, changed and written back whole.)
    # @param topic [String, Symbol, nil] a topic's settings (give one of topic:, broker: or group:)
    # @param broker [Integer, nil] a broker's settings, by id
    # @param group [String, nil] a group's settings (Kafka 4), e.g. a share group's
    #   "share.auto.offset.reset" => "earliest": without it the group starts at the latest offset
    # @param set [Hash] settings to set, name => value
    # @param delete [Array<String, Symbol>] settings to delete (back to their default)
    # @return [nil]
    # @raise [ArgumentError] none or more than one of topic:, broker: and group:, or malformed settings (a NUL byte in one)
    # @raise [Errors::InvalidAdminRequestError] the broker refused a setting
    # @example
    #   admin.alter_configs(topic: "events", set: { "retention.ms" => "3600000" }, delete: ["cleanup.policy"])
    def alter_configs(topic: nil, broker: nil, group: nil, set: {}, delete: [])
      type, name = resource(topic, broker, group)
      set = settings(set, "set")
      delete = setting_names(delete)
      check_items!(:alter_configs, name, INCREMENTAL ? alter_incrementally(type, name, set, delete) : alter_whole(type, name, set, delete))
      settle(:alter_configs, name) { configs_show?(type, name, set, delete) }
    end

    # The partition's first offset and the offset after its last message (the
    # high watermark: an open transaction's messages included, as Kafka's
    # Admin reads it; a read_committed consumer's #query_watermark_offsets
    # ends at the last stable offset instead). isolation.level in the admin's
    # kafka settings changes that (Config#kafka_pairs).
    # @param topic [String, Symbol]
    # @param partition [Integer]
    # @return [Array(Integer, Integer)] [low, high]
    # @raise [Errors::UnknownTopicError]
    def watermark_offsets(topic, partition)
      topic = topic_name(topic)
      partition!(partition)
      deadline = now + (@config.max_wait_timeout / 1000.0)
      code, low, high = query_watermarks(topic, partition, deadline)
      if code == UNKNOWN_PARTITION
        # librdkafka takes a partition missing from the topic it has cached as
        # final, until the entry expires (metadata.max.age.ms, 15 minutes): a
        # broker that was restarting answered with fewer partitions, and the
        # rolling upgrade's lag poller failed on every call for minutes. The
        # topic's metadata asked afresh replaces that entry; then once more.
        blocking(:watermark_offsets, topic) { |client, ms| client.partition_count(topic, ms) }
        code, low, high = query_watermarks(topic, partition, deadline)
      end
      fail!(:watermark_offsets, "#{topic}/#{partition}", code, nil) unless code.zero?
      [low, high]
    end

    # The first offset of each partition whose message is at or after `time`;
    # -1 where there is none (the partition's next offset comes later).
    # @return [Hash] { partition => offset }
    # @param topic [String, Symbol]
    # @param time [Time]
    # @raise [ArgumentError] time is not a Time, is before 1970-01-01 00:00:00 UTC,
    #   or is further from it than Kafka's 64-bit milliseconds reach
    # @raise [Errors::UnknownTopicError]
    def offsets_for_time(topic, time)
      topic = topic_name(topic)
      ms = timestamp_ms(time)
      query = describe_topic(topic)[:partitions].map { |partition| [topic, partition[:partition], ms] }
      code, found = blocking(:offsets_for_time, topic) { |client, timeout| client.offsets_for_times(query, timeout) }
      fail!(:offsets_for_time, topic, code, nil) unless code.zero?
      check_partitions!(:offsets_for_time, topic, found).to_h { |_, partition, offset| [partition, offset] }
    end

    # @return [String] the id, and whether it is closed
    def inspect = "#<#{self.class.name} #{@id.inspect}#{" closed" if closed?}>"

    private

    # Metadata of the whole cluster (librdkafka 2.0.2 has no DescribeTopics or DescribeCluster).
    def query_watermarks(topic, partition, deadline)
      Shared::LeaderWait.retrying(deadline, pending: Shared::LeaderWait::LEADER_PENDING) do
        blocking(:watermark_offsets, topic) { |client, ms| client.watermarks(topic, partition, ms) }
      end
    end

    def describe_all(action, subject)
      code, topics, brokers, cluster_id, controller_id = blocking(action, subject) { |client, ms| client.describe(ms) }
      fail!(action, subject, code, nil) unless code.zero?
      described, failed = topics.partition { |_, error, _| error.zero? }
      { topics: described.to_h { |name, _, partitions| [name, partitions.map { |p| partition_info(p) }] },
        errors: failed.to_h { |name, error, _| [name, error] }, # a topic the broker answered with an error (a leader election, say)
        brokers: brokers.map { |id, host, port| { id: id, host: host, port: port } },
        cluster_id: cluster_id, controller_id: controller_id }
    end

    # The controller answered; the brokers' metadata follows a moment later. A
    # call returns once the change shows there, so the next call sees it.
    # @return nil
    def await_metadata(action, name)
      settle(action, name) { yield(describe_all(action, name)[:topics][name]) }
    end

    # Until the block is true, within max_wait_timeout.
    # @return nil
    def settle(action, name)
      deadline = now + (@config.max_wait_timeout / 1000.0)
      until yield
        fail!(action, name, TIMED_OUT, "done, but the brokers did not show it within max_wait_timeout") if now >= deadline
        sleep(SETTLE_BACKOFF) # neither metadata nor configs have a change notification to wait on
      end
    end

    # Every setting set shows its value (a sensitive one shows none) and none deleted is still set on the resource.
    def configs_show?(type, name, set, delete)
      entries = config_entries(type, name).to_h { |entry| [entry.first, entry] }
      set.all? { |setting, value| entries[setting]&.then { |entry| entry[5] || same_setting?(entry[1], value) } } &&
        delete.none? { |setting| entries[setting]&.[](2) == DYNAMIC_SOURCE.fetch(type) }
    end

    # The broker stores a value normalized: "TRUE" as "true", "01" as "1",
    # "0.50" as "0.5", "compact, delete" as "compact,delete". Compared the
    # way it normalizes (case, numbers by value, lists item by item), never
    # as strings: equal strings alone left alter_configs waiting its whole
    # max_wait_timeout for a change the broker had made.
    def same_setting?(stored, wanted)
      return stored == wanted if stored.nil? || wanted.nil?

      stored = stored.strip
      wanted = wanted.strip
      return true if stored.casecmp?(wanted)
      return list(stored) == list(wanted) if stored.include?(",") || wanted.include?(",")

      (number(stored) || :stored) == (number(wanted) || :wanted)
    end

    def list(value) = value.split(",").map { |item| item.strip.downcase }.reject(&:empty?)

    def number(value)
      Rational(value)
    rescue ArgumentError, ZeroDivisionError
      nil
    end

    def partition_info((partition, leader, replicas, isr))
      { partition: partition, leader: leader, replicas: replicas, isr: isr }
    end

    def resource(topic, broker, group = nil)
      raise ArgumentError, "give one of topic:, broker: or group:" unless [topic, broker, group].compact.size == 1
      return [RESOURCE_TOPIC, topic_name(topic)] if topic
      return [RESOURCE_GROUP, group_id(group)] if group
      raise ArgumentError, "broker: takes a broker id (Integer from 0 to #{INT32_MAX}), got #{broker.inspect}" unless
        broker.is_a?(Integer) && !broker.negative? && broker <= INT32_MAX

      [RESOURCE_BROKER, broker.to_s]
    end

    # [[name, value, source, read_only, default, sensitive], ...]
    def config_entries(type, name)
      result = request(:describe_configs, name) { |client, id, ms| client.describe_configs(id, ms, type, name) }
      check_items!(:describe_configs, name, result).flat_map(&:last)
    end

    def alter_incrementally(type, name, set, delete)
      request(:alter_configs, name) { |client, id, ms| client.incremental_alter_configs(id, ms, type, name, set, delete) }
    end

    def alter_whole(type, name, set, delete)
      merged = dynamic_settings(type, name).merge(set.to_h).except(*delete).to_a
      request(:alter_configs, name) { |client, id, ms| client.alter_configs(id, ms, type, name, merged) }
    end

    # What was set on the resource itself: what AlterConfigs would otherwise reset.
    def dynamic_settings(type, name)
      config_entries(type, name).select { |entry| entry[2] == DYNAMIC_SOURCE.fetch(type) }.to_h do |setting, value, *, sensitive|
        # The broker never shows a sensitive value: writing the others back would drop it.
        sensitive!(name, setting) if sensitive && value.nil?
        [setting, value]
      end
    end

    def sensitive!(name, setting)
      fail!(:alter_configs, name, KafkaError.number_for(:invalid_arg), "#{setting} is sensitive and unreadable: set it again in set:")
    end

    # Kafka's timestamps are 64-bit milliseconds since the epoch. A negative
    # one is no time but a query (-1 the latest offsets, -2 the earliest),
    # answered as if it were one, or refused by the broker (unsupported_version).
    def timestamp_ms(time)
      raise ArgumentError, "offsets_for_time takes a Time, got #{time.inspect}" unless time.is_a?(Time)

      ms = (time.to_r * 1000).floor
      return ms if ms.between?(0, INT64_MAX)

      raise ArgumentError, "time must be at or after 1970-01-01 00:00:00 UTC and at most #{INT64_MAX} ms after it, got #{time.inspect}"
    end

    def check_partitions!(action, subject, partitions)
      partitions.each { |_, _, _, code| fail!(action, subject, code, nil) unless code.zero? }
    end

    # Kafka's rule, checked before anything is sent: a name the broker
    # refuses closes the connection (an over-long one), or fails in an
    # encoding error (a non-ASCII one).
    TOPIC_NAME = /\A[a-zA-Z0-9._-]{1,249}\z/
    # Kafka's fields are 32-bit signed integers.
    INT32_MAX = (2**31) - 1
    # Offsets and timestamps are 64-bit signed integers.
    INT64_MAX = (2**63) - 1
    private_constant :TOPIC_NAME, :INT32_MAX, :INT64_MAX

    def topic_name(name)
      text = name.is_a?(String) || name.is_a?(Symbol) ? name.to_s : ""
      return text if text.valid_encoding? && text.match?(TOPIC_NAME) && !%w[. ..].include?(text)

      raise ArgumentError, "a topic name is a String or Symbol of 1 to 249 characters a-z, A-Z, 0-9, '.', '_' and '-' " \
                           "(not '.' or '..'), got #{name.inspect[0, 300]}"
    end

    def count!(value, what)
      return if value.is_a?(Integer) && value.positive? && value <= INT32_MAX

      raise ArgumentError, "#{what} must be a positive Integer up to #{INT32_MAX}, got #{value.inspect}"
    end

    def partition!(value)
      return if value.is_a?(Integer) && !value.negative? && value <= INT32_MAX

      raise ArgumentError, "a partition must be an Integer from 0 to #{INT32_MAX}, got #{value.inspect}"
    end

    # { name => value } -> [[String, String], ...]
    def settings(hash, what)
      raise ArgumentError, "#{what} takes a Hash of settings, got #{hash.inspect}" unless hash.is_a?(Hash)

      hash.map { |name, value| c_strings!([name.to_s, value.to_s], "#{what} #{name.to_s.inspect[0, 100]}") }
    end

    def setting_names(names)
      raise ArgumentError, "delete takes an Array of setting names, got #{names.inspect}" unless names.is_a?(Array)

      c_strings!(names.map(&:to_s), "delete")
    end

    # librdkafka takes C strings, which a NUL byte would cut short (the native
    # call refuses one without saying which argument had it).
    def c_strings!(texts, what)
      bad = texts.find { |text| text.b.include?("\0") }
      raise ArgumentError, "#{what} has a NUL byte, which Kafka's C client cannot send, in #{bad.inspect[0, 200]}" if bad

      texts
    end
  end
end
