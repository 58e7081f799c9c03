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
    class Lanes
      # What ordering: takes.
      ORDERINGS = %i[key partition none].freeze

      def initialize(ordering)
        raise ArgumentError, "ordering is one of #{ORDERINGS.map(&:inspect).join(", ")}, got #{ordering.inspect}" unless ORDERINGS.include?(ordering)

        @ordering = ordering
        @waiting = {} # lane => messages not started, in order
        @running = {} # lane => true while one of its messages runs
        @ready = [] # lanes with a message waiting and none running, first come first served
        @by_partition = Hash.new(0) # [topic, partition] => messages waiting
      end

      # Queues a message in its lane.
      def add(message)
        lane = lane_of(message)
        queue = (@waiting[lane] ||= [])
        queue << message
        @by_partition[[message.topic, message.partition]] += 1
        @ready << lane if queue.size == 1 && !@running[lane]
      end

      # The next message that may start (its lane is then running), or nil.
      def start
        lane = @ready.shift or return

        queue = @waiting[lane]
        message = queue.shift
        @waiting.delete(lane) if queue.empty?
        @running[lane] = true
        uncount(message)
        message
      end

      # The message's block returned: the next of its lane may start.
      def finished(message)
        lane = lane_of(message)
        @running.delete(lane)
        @ready << lane if @waiting.key?(lane)
      end

      # Messages not started on these partitions are taken out (a revocation).
      # @param partitions [Array<Array(String, Integer)>]
      # @return [Array<Message>] what was taken out
      def drop(partitions)
        gone = partitions.to_h { |topic, partition| [[topic, partition], true] }
        dropped = []
        @waiting.delete_if do |_, queue|
          queue.reject! { |message| gone[[message.topic, message.partition]] && dropped << message }
          queue.empty?
        end
        @ready.select! { |lane| @waiting.key?(lane) }
        dropped.each { |message| uncount(message) }
      end

      # How many messages wait.
      def waiting = @waiting.sum { |_, queue| queue.size }

      # How many messages of this partition wait.
      def waiting_in(topic, partition) = @by_partition[[topic, partition]]

      # The lowest offset of this partition's waiting messages, or nil (a
      # lane's first message is its lowest: each lane holds one partition's).
      def lowest_waiting(topic, partition)
        return if @by_partition[[topic, partition]].zero?

        @waiting.each_value.filter_map { |(first)| first.offset if first.topic == topic && first.partition == partition }.min
      end

      private

      def uncount(message)
        pair = [message.topic, message.partition]
        @by_partition.delete(pair) if (@by_partition[pair] -= 1).zero?
      end

      def lane_of(message)
        case @ordering
        when :key then message.key ? [message.topic, message.partition, message.key] : [message.topic, message.partition]
        when :partition then [message.topic, message.partition]
        else message.__id__
        end
      end
    end
  end
end
