# frozen_string_literal: true

require "rspec/expectations"

module Sluice
  module Testing
    # RSpec matchers for producers whose client keeps messages
    # (Clients::Buffered, Testing.producer). Included in every example group
    # by `require "sluice/testing/rspec"` (`require "sluice/testing"` under RSpec).
    #
    # @example
    #   expect(producer).to have_produced(topic: "events", payload: "hello")
    #   expect(producer).to have_produced(topic: "events", key: "user-1").twice
    #   expect(producer).to have_produced(topic: "events", headers: hash_including("type" => "created")).times(3)
    #   expect(producer).not_to have_produced(topic: "audit")
    module Matchers
      # Matches the messages a producer kept, by the fields given.
      class HaveProduced
        include ::RSpec::Matchers::Composable

        # The message fields it can match (keys of the messages Clients::Buffered keeps).
        FIELDS = %i[topic payload key partition headers label].freeze

        # @param expected [Hash] as have_produced's
        # @raise [ArgumentError] a field that is not one of FIELDS
        def initialize(expected)
          unknown = expected.keys - FIELDS
          raise ArgumentError, "have_produced takes #{FIELDS.join(", ")}; unknown: #{unknown.join(", ")}" unless unknown.empty?

          @expected = expected
          @count = nil
        end

        # Exactly count matching messages (default: at least one).
        # @param count [Integer]
        # @return [self]
        def times(count)
          @count = count
          self
        end

        # Exactly one matching message.
        # @return [self]
        def once = times(1)
        # Exactly two matching messages.
        # @return [self]
        def twice = times(2)

        # Counts the matching messages of the producer (or client) given.
        # @raise [ArgumentError] its client keeps no messages (not a Clients::Buffered)
        def matches?(producer)
          @produced = messages_of(producer)
          found = @produced.count { |message| match?(message) }
          @found = found
          @count ? found == @count : found.positive?
        end

        # For `not_to`: no matching message (or not the count given to #times).
        def does_not_match?(producer) = !matches?(producer)

        # What RSpec prints for the expectation (documentation format, one-liners).
        def description = "have produced #{wanted}"

        # What was expected, how many messages matched, and the last 20 produced.
        def failure_message = "expected to have produced #{wanted}, found #{found_count}#{listing}"

        # As #failure_message, for `not_to`.
        def failure_message_when_negated = "expected not to have produced #{wanted}, found #{found_count}#{listing}"

        private

        def match?(message)
          @expected.all? do |field, expected|
            actual = message[field]
            actual = actual.to_s if field == :topic
            expected = expected.to_s if field == :topic && expected.is_a?(Symbol)
            values_match?(expected, actual)
          end
        end

        def messages_of(producer)
          client = producer.respond_to?(:client) ? producer.client : producer
          return client.messages if client.respond_to?(:messages)

          raise ArgumentError, "have_produced needs a producer whose client keeps messages (config.client_class = Sluice::Clients::Buffered), " \
                               "got #{client.class}"
        end

        def wanted
          fields = @expected.map { |field, value| "#{field}: #{value.respond_to?(:description) ? value.description : Shared::Shown.call(value)}" }
          "a message with #{fields.join(", ")}#{" #{@count} time(s)" if @count}"
        end

        def found_count = @found == 1 ? "1 such message" : "#{@found} such messages"

        def listing
          return "; nothing was produced" if @produced.empty?

          shown = @produced.last(20).map { |message| "\n  #{Shared::Shown.call(message)}" }.join
          more = @produced.size > 20 ? " (the last 20 of #{@produced.size})" : ""
          "; produced#{more}:#{shown}"
        end
      end

      # Matches a producer (or its client) that kept a message with these fields.
      # @param expected [Hash] topic:, payload:, key:, partition:, headers:, label:
      #   (values or RSpec matchers; a field not given matches anything)
      # @return [HaveProduced]
      # @raise [ArgumentError] a field that is not one of HaveProduced::FIELDS
      def have_produced(**expected) = HaveProduced.new(expected) # rubocop:disable Naming/PredicateName -- RSpec's have_ matcher name
    end
  end
end

RSpec.configure { |config| config.include Sluice::Testing::Matchers } if RSpec.respond_to?(:configure)

# Required first (require "sluice/testing/rspec"), this file loads the rest of Sluice::Testing.
require_relative "../testing" unless Sluice::Testing.respond_to?(:producer)
