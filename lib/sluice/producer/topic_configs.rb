# frozen_string_literal: true

module Sluice
  class Producer
    # The topic-level settings of a producer's variants, each registered with
    # the native client under an id (1, 2, ...; 0 is the producer's own
    # settings). The same settings get the same id, and so share topic
    # handles; a reloaded client gets every registration again, in order, so
    # the ids of existing variants stay valid.
    class TopicConfigs
      def initialize
        @mutex = Mutex.new
        @ids = {} # [[name, value], ...] => id
      end

      # @yieldreturn the current native client (read under our lock, so a
      #   reload cannot slip between registering and using it)
      # @return [Integer] the id of these settings
      # @raise [Errors::ConfigurationInvalidError] a setting librdkafka refuses at topic level
      def id_for(topic_config)
        pairs = normalize(topic_config)
        return 0 if pairs.empty?

        @mutex.synchronize do
          @ids[pairs] ||= begin
            id = yield.add_topic_config(pairs)
            raise "topic config ids out of step (#{id} for #{@ids.size + 1})" unless id == @ids.size + 1

            id
          end
        end
      end

      # A new client (connect, reload) learns every registered setting, then
      # the block makes it the current one.
      def register(client)
        @mutex.synchronize do
          @ids.each_key { |pairs| client.add_topic_config(pairs) }
          yield
        end
      end

      private

      def normalize(topic_config)
        raise Errors::ConfigurationInvalidError, "topic_config must be a Hash, got #{topic_config.class}" unless topic_config.is_a?(Hash)

        topic_config.map do |name, value|
          unless name.is_a?(Symbol) || name.is_a?(String)
            raise Errors::ConfigurationInvalidError, "topic_config names must be Symbols or Strings, got #{name.inspect}"
          end
          raise Errors::ConfigurationInvalidError, "topic_config #{name} must not be nil" if value.nil?

          [name.to_s, value.to_s].each { |s| raise Errors::ConfigurationInvalidError, "topic_config #{name} contains a NUL byte" if s.include?("\0") }
        end.sort.freeze
      end
    end
  end
end
