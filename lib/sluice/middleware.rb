# frozen_string_literal: true

module Sluice
  # Steps every message goes through before it is validated and produced:
  # anything that responds to #call(message) and returns the message to go on
  # with (the same Hash changed, or a new one).
  #
  #   producer.middleware.append(->(message) { message[:headers] = { "trace" => id }; message })
  #
  # Steps run in order, on the thread that produces. Adding one while other
  # threads produce is safe: each message sees the steps of one moment.
  class Middleware
    NONE = [].freeze

    def initialize
      @mutex = Mutex.new
      @steps = NONE # copy-on-write: produce reads it without locking
    end

    # Runs last. @return self
    def append(step = nil, &block)
      change { |steps| steps + [callable(step, block)] }
    end

    # Runs first. @return self
    def prepend(step = nil, &block)
      change { |steps| [callable(step, block)] + steps }
    end

    def empty? = @steps.empty?

    # @return [Hash] the message after every step
    def run(message)
      steps = @steps
      return message if steps.empty?

      steps.each { |step| message = step.call(message) }
      message
    end

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
