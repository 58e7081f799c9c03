# frozen_string_literal: true

module Sluice
  class Consumer
    # What a block's failure becomes, when each_message or each_batch is given
    # retries: or dead_letter: (docs/FAILURES.md). A Policy wraps the block
    # where the read hands it a message, so the lane and offset machinery is
    # untouched: a retry runs in the worker that holds the key's lane (the
    # key's later messages wait, other keys go on), and the message stays
    # unfinished, holding its partition's offset, until the block returned or
    # its dead letter was acknowledged.
    # @api private
    module Failure
      # A retry's backoff cut short by #stop or close: the read ends as a stop
      # ends it (each_message returns nil), the message not stored, handed out
      # again by the next read.
      class Abandoned < StandardError; end

      module_function

      # @param retries [Hash, nil] { attempts: Integer >= 1, backoff: Range of seconds }
      # @param dead_letter [String, Hash, nil] the topic, or { topic:, producer:, partitioner: }
      # @param host [#call] (topic, producer, partitioner) => DeadLetters, built the way the consumer (or its double) can
      # @return [Policy, nil] nil when neither is given: the block runs as it is
      # @raise [ArgumentError] a setting out of range
      def policy(retries:, dead_letter:, stopped:, instrument:, host:)
        return if retries.nil? && dead_letter.nil?

        attempts, backoff = Settings.retries(retries)
        Policy.new(attempts: attempts, backoff: backoff, dead_letters: dead_letter && host.call(*Settings.dead_letter(dead_letter)),
                   stopped: stopped, instrument: instrument)
      end
    end
  end
end

require_relative "failure/settings"
require_relative "failure/backoff"
require_relative "failure/dead_letters"
require_relative "failure/policy"
require_relative "failure/reading"
