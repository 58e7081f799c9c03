# frozen_string_literal: true

module Sluice
  class Consumer
    # A concurrent each_message's fairness between partitions. librdkafka
    # hands messages over a fetch at a time, thousands of one partition
    # before the next: taken in that order, the bound (max_buffered) filled
    # with one partition's messages while the others waited behind them, so
    # ordering: :partition ran one block at a time whatever the concurrency.
    #
    # So each assigned partition gets a share of the bound: a message taken
    # beyond its partition's share pauses that partition (librdkafka stops
    # fetching it, what is buffered of it is dropped) and goes back to it
    # (a seek: it is read again, nothing is skipped). The partition resumes
    # once half its share has started, and at the end of the read.
    #
    # For ordering: :partition only. A pause costs a refetch, and under :key
    # the other keys' messages of a partition keep the workers busy anyway:
    # shares there took 6 partitions at concurrency 16 from 1,519 to 374
    # messages a second (bench/parallel.rb), where :partition went from 86 to 136,
    # and at 256 from 88 to 553.
    class PartitionShares
      include PausedPartitions

      # ordering: :key and :none: nothing is taken back.
      module None
        # @return [false]
        def self.take_back?(_message, _waiting) = false
        # Nothing was paused.
        def self.resume_drained = nil
        # Nothing was paused.
        def self.rebalanced(_given_up) = nil
        # Nothing was paused.
        def self.resume_all = nil
      end

      # @param assignment [#call] Consumer#assignment
      # @param pause [#call] Consumer#pause(topic, partition)
      # @param resume [#call] Consumer#resume(topic, partition)
      # @param rewind [#call] Consumer#rewind(messages)
      def initialize(max_buffered:, assignment:, pause:, resume:, rewind:)
        @max_buffered = max_buffered
        @assignment = assignment
        @pause = pause
        @resume = resume
        @rewind = rewind
        @share = nil # per partition, for the assignment of now (nil: not counted yet)
        @paused = [] # [topic, partition] this read paused
      end

      # Takes the message back (and pauses its partition) when its partition
      # has its share waiting already.
      # @param waiting [Integer] the partition's messages taken and not started
      # @return [Boolean] it was taken back: not to be started
      def take_back?(message, waiting)
        return false if waiting < share

        pair = [message.topic, message.partition]
        unless @paused.include?(pair)
          @pause.call(*pair)
          @paused << pair
        end
        @rewind.call([message])
        true
      rescue Errors::ConsumerStateError # no longer assigned: started as any other
        false
      end

      # Resumes the partitions paused here that have half their share or less waiting.
      # @yieldparam topic [String]
      # @yieldparam partition [Integer]
      # @yieldreturn [Integer] the partition's messages waiting
      def resume_drained
        return if @paused.empty?

        half = share / 2
        @paused.reject! { |pair| yield(*pair) <= half && resume(pair) }
      end

      # After a rebalance: partitions given up are no longer ours to resume; the shares change.
      def rebalanced(given_up)
        @paused -= given_up
        @share = nil
      end

      # The read ends: what it paused is fetched again.
      def resume_all
        @paused.each { |pair| resume(pair) }
        @paused.clear
      end

      private

      def share
        @share ||= begin
          partitions = @assignment.call.sum { |_, list| list.size }
          [@max_buffered / [partitions, 1].max, 1].max
        end
      end
    end
  end
end
