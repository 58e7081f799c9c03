# frozen_string_literal: true

module Sluice
  class Consumer
    # The checks of a consumer's arguments, raising ArgumentError before
    # anything reaches librdkafka; shared with the in-memory
    # Testing::Consumer, so a test refuses what production would.
    # @api private
    module Arguments
      # The largest Integer poll's timeout may be to pass without a call to
      # #milliseconds (a Fixnum: finite as a Float); larger ones go through it.
      MAX_INTEGER_MS = (1 << 62) - 1

      private

      def topic_name(topic)
        return topic.to_s if (topic.is_a?(String) || topic.is_a?(Symbol)) && !topic.empty?

        raise ArgumentError, "a topic is a non-empty String or Symbol, got #{topic.inspect}"
      end

      def partition_number(partition)
        return partition if partition.is_a?(Integer) && partition >= 0

        raise ArgumentError, "a partition is an Integer >= 0, got #{partition.inspect}"
      end

      def offset_number(offset)
        return offset if offset.is_a?(Integer)

        raise ArgumentError, "an offset is an Integer, got #{offset.inspect}"
      end

      def milliseconds(value, name)
        return if value.is_a?(Numeric) && !value.negative? && value.to_f.finite?

        raise ArgumentError, "#{name} is a number of milliseconds >= 0, got #{value.inspect}"
      end
    end
  end
end
