# frozen_string_literal: true

module Sluice
  # Steps every message goes through before it is validated and produced:
  # anything that responds to #call(message) and returns the message to go on
  # with (the same Hash changed, or a new one).
  #
  # @example
  #   producer.middleware.append(->(message) { message[:headers] = { "trace" => id }; message })
  #
  # Steps run in order, on the thread that produces. Adding one while other
  # threads produce is safe: each message sees the steps of one moment.
  class Middleware
    # No steps.
    # @api private
    NONE = [].freeze

    # A producer builds its own: use Producer#middleware.
    def initialize
      @mutex = Mutex.new
      @steps = NONE # copy-on-write: produce reads it without locking
    end

    # Adds a step that runs after the others.
    # @param step [#call, nil] or a block
    # @return [self]
    # @raise [ArgumentError] the step does not respond to #call
    # @example
    #   producer.middleware.append { |message| message.merge(headers: { "app" => "billing" }) }
    def append(step = nil, &block)
      change { |steps| steps + [callable(step, block)] }
    end

    # Adds a step that runs before the others.
    # @param step [#call, nil] or a block
    # @return [self]
    # @raise [ArgumentError] the step does not respond to #call
    def prepend(step = nil, &block)
      change { |steps| [callable(step, block)] + steps }
    end

    # @return [Boolean] no step added
    def empty? = @steps.empty?

    # @param message [Hash]
    # @return [Hash] the message after every step
    def run(message)
      steps = @steps
      return message if steps.empty?

      steps.each { |step| message = step.call(message) }
      message
    end

    # @param messages [Array<Hash>]
    # @return [Array<Hash>] each message after every step (the Array itself when there are none)
    def run_many(messages)
      return messages if @steps.empty?

      messages.map { |message| run(message) }
    end

    private

    def change
      @mutex.synchronize { @steps = yield(@steps).freeze }
      self
    end

    def callable(step, block)
      step ||= block
      raise ArgumentError, "a middleware step must respond to #call, got #{step.inspect}" unless step.respond_to?(:call)

      step
    end
  end
end
