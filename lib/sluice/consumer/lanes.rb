# frozen_string_literal: true

module Sluice
  class Consumer
    # The order rule of a concurrent each_message: messages waiting for a
    # worker, in lanes. A lane's messages start one at a time, in the order
    # added, and the next only once the one before finished; different lanes
    # run side by side. Pure (no threads, no broker): Workers locks around it.
    #
    # - :key: a lane per topic, partition and key (keyless messages: one lane
    #   per partition), so each key's messages are processed in order;
    # - :partition: a lane per topic and partition;
    # - :none: a lane per message.
    #
    # Every message passes here twice with a worker waiting on the lock, so a
    # lane is found without building a key: nested Hashes by topic, partition
    # and key (no Array allocated, hashed and compared per lookup: they were
    # 15% of a 256-worker read's CPU), and a started message keeps its lane.
    class Lanes
      # What ordering: takes.
      ORDERINGS = %i[key partition none].freeze
      # A lane: its messages not started, in order; running while one of its messages runs.
      class Lane
        attr_reader :topic, :partition, :key, :messages
        attr_accessor :running

        def initialize(topic, partition, key)
          @topic = topic
          @partition = partition
          @key = key
          @messages = []
          @running = false
        end
      end
      private_constant :Lane

      def initialize(ordering)
        raise ArgumentError, "ordering is one of #{ORDERINGS.map(&:inspect).join(", ")}, got #{ordering.inspect}" unless ORDERINGS.include?(ordering)

        @ordering = ordering
        @lanes = {} # topic => { partition => { key => Lane } }: lanes with a message waiting or running
        @ready = [] # lanes with a message waiting and none running, first come first served
        @started = {}.compare_by_identity # message => its lane, until it finished
        @waiting = {} # topic => { partition => messages waiting }
      end

      # Queues a message in its lane.
      def add(message)
        lane = lane_of(message)
        lane.messages << message
        count(message, 1)
        @ready << lane if lane.messages.size == 1 && !lane.running
      end

      # The next message that may start (its lane is then running), or nil.
      def start
        lane = @ready.shift or return

        message = lane.messages.shift
        lane.running = true
        @started[message] = lane
        count(message, -1)
        message
      end

      # The message's block returned: the next of its lane may start.
      def finished(message)
        lane = @started.delete(message) or return

        lane.running = false
        lane.messages.empty? ? forget(lane) : @ready << lane
      end

      # Messages not started on these partitions are taken out (a revocation).
      # @param partitions [Array<Array(String, Integer)>]
      # @return [Array<Message>] what was taken out
      def drop(partitions)
        dropped = []
        partitions.each do |topic, partition|
          @lanes.dig(topic, partition)&.values&.each do |lane|
            dropped.concat(lane.messages)
            lane.messages.clear
            forget(lane) unless lane.running
          end
          @waiting[topic]&.delete(partition)
        end
        @ready.reject! { |lane| lane.messages.empty? } unless dropped.empty?
        dropped
      end

      # How many messages wait.
      def waiting = @waiting.sum { |_, partitions| partitions.sum { |_, count| count } }

      # How many messages of this partition wait.
      def waiting_in(topic, partition) = @waiting[topic]&.[](partition) || 0

      # The lowest offset of this partition's waiting messages, or nil (a
      # lane's first message is its lowest: each lane holds one partition's).
      def lowest_waiting(topic, partition)
        return if waiting_in(topic, partition).zero?

        @lanes.dig(topic, partition).each_value.filter_map { |lane| lane.messages.first&.offset }.min
      end

      private

      # A partition's count of waiting messages, by delta; none is no entry.
      def count(message, delta)
        partitions = (@waiting[message.topic] ||= {})
        left = partitions.fetch(message.partition, 0) + delta
        left.zero? ? partitions.delete(message.partition) : partitions[message.partition] = left
      end

      def lane_of(message)
        key = case @ordering
              when :key then message.key # nil (keyless): the partition's lane
              when :partition then nil
              else message.__id__ # a lane of its own
              end
        lanes = ((@lanes[message.topic] ||= {})[message.partition] ||= {})
        lanes[key] ||= Lane.new(message.topic, message.partition, key)
      end

      # An empty lane that does not run is no longer kept (its partition's and topic's Hashes stay: few).
      def forget(lane)
        @lanes[lane.topic][lane.partition].delete(lane.key)
      end
    end
  end
end
