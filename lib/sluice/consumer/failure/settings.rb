# frozen_string_literal: true

module Sluice
  class Consumer
    module Failure
      # The checks of retries: and dead_letter:, raising ArgumentError at the
      # call, before anything is read (shared with Testing::Consumer).
      # @api private
      module Settings
        # retries: without backoff: (seconds).
        DEFAULT_BACKOFF = (0.1..30.0)
        # How a dead letter's partition is chosen when partitioner: is not given.
        PARTITIONERS = %i[same key].freeze

        module_function

        # @return [Array(Integer, Backoff)] attempts (1 when retries is nil) and the backoff
        def retries(retries)
          return [1, Backoff.new(DEFAULT_BACKOFF)] if retries.nil?
          raise ArgumentError, "retries takes { attempts:, backoff: }, got #{retries.inspect}" unless retries.is_a?(Hash)

          unknown = retries.keys - %i[attempts backoff]
          raise ArgumentError, "retries takes attempts: and backoff:, unknown: #{unknown.join(", ")}" unless unknown.empty?

          [attempts(retries.fetch(:attempts, 3)), Backoff.new(backoff(retries.fetch(:backoff, DEFAULT_BACKOFF)))]
        end

        # @return [Array(String, Object, Object)] topic, producer (nil: the consumer's own), partitioner
        def dead_letter(dead_letter)
          dead_letter = { topic: dead_letter } unless dead_letter.is_a?(Hash)
          unknown = dead_letter.keys - %i[topic producer partitioner]
          raise ArgumentError, "dead_letter takes topic:, producer: and partitioner:, unknown: #{unknown.join(", ")}" unless unknown.empty?

          [topic(dead_letter[:topic]), producer(dead_letter[:producer]), partitioner(dead_letter.fetch(:partitioner, :same))]
        end

        def attempts(value)
          return value if value.is_a?(Integer) && value >= 1

          raise ArgumentError, "retries' attempts is an Integer >= 1 (1: no retry), got #{value.inspect}"
        end

        def backoff(range)
          bounds = range.is_a?(Range) ? [range.begin, range.end] : []
          valid = bounds.size == 2 && bounds.all? { |b| b.is_a?(Numeric) && b.positive? && b.to_f.finite? } && bounds[0] <= bounds[1]
          return range if valid && !range.exclude_end?

          raise ArgumentError, "retries' backoff is a Range of seconds > 0, low..high (e.g. 0.1..30.0), got #{range.inspect}"
        end

        def topic(topic)
          return topic if topic.is_a?(String) && !topic.empty?

          raise ArgumentError, "dead_letter's topic is a non-empty String, got #{topic.inspect}"
        end

        def producer(producer)
          return producer if producer.nil? || producer.respond_to?(:produce_many_sync)

          raise ArgumentError, "dead_letter's producer is a Sluice::Producer, got #{producer.class}"
        end

        def partitioner(partitioner)
          return partitioner if PARTITIONERS.include?(partitioner) || partitioner.respond_to?(:call)

          raise ArgumentError, "dead_letter's partitioner is :same, :key or a callable (message, partition_count) => partition, " \
                               "got #{partitioner.inspect}"
        end
      end
    end
  end
end
