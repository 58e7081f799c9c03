# frozen_string_literal: true

module Sluice
  class Consumer
    # Fetched messages as text instead of Message objects: what `sluice
    # tail` reads with (issue 58), its output formatted natively from
    # librdkafka's messages, no Ruby object a message.
    module Rendering
      # The fields an op may print (see #render_batches), in the native code's order (ext/sluice/render.c).
      FIELDS = %i[value key value_size key_size value_size_binary timestamp topic partition offset].freeze

      # From now on #each_batch and #each_message hand over each run of
      # fetched messages of one partition as one Message: its payload the
      # messages rendered one after another by ops, its topic and partition
      # theirs, its offset the run's last (committing or storing it covers
      # the run), no key, headers or timestamp. Irreversible.
      # @api private
      # @param ops [Array<String, Symbol>] a String is printed as it is; a
      #   Symbol (one of FIELDS) prints that field of the message as kcat
      #   does: the bytes, a size (-1 for NULL), value_size_binary as a
      #   big-endian int32, the timestamp in ms (nothing without one), the
      #   partition, the offset
      # @param null [String] what a NULL key or value prints
      # @return [nil]
      def render_batches(ops, null: "")
        open_client.render_batches(ops.map { |op| op.is_a?(Symbol) ? FIELDS.index(op) || raise(ArgumentError, "unknown field #{op}") : op }, null)
      end
    end
  end
end
