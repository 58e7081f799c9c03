# frozen_string_literal: true

module Sluice
  module Shared
    # Messages, headers and batches as text for people (a log line, a matcher's
    # failure), the same on every Ruby: Hashes as Ruby 3.4 writes them
    # (`topic: "t", "k" => v` between braces), where 3.1-3.3 write
    # `:topic=>"t", "k"=>v`.
    # A line must not change with the Ruby that wrote it.
    # @api private
    module Shown
      # Symbol keys Ruby 3.4 quotes ("a-b": 1, "c=": 1): not a plain symbol
      # name, a name starting with @, $ or !, or ending in an operator.
      QUOTED_NAME = %r{\A[@$!]|[-+*/`%^&|\]<=>~@]\z}

      # @param data [Object]
      # @return [String] data.inspect, but with Hashes (nested too) in Ruby 3.4's form; a Hash or Array
      #   inside itself is `{...}` or `[...]`, as inspect writes it
      def self.call(data, within = [])
        return data.inspect unless data.is_a?(Hash) || data.is_a?(Array)
        return data.is_a?(Hash) ? "{...}" : "[...]" if within.any? { |outer| outer.equal?(data) }

        within += [data]
        if data.is_a?(Hash)
          "{#{data.map { |key, value| "#{key(key, within)} #{call(value, within)}" }.join(", ")}}"
        else
          "[#{data.map { |item| call(item, within) }.join(", ")}]"
        end
      end

      def self.key(key, within)
        return "#{call(key, within)} =>" unless key.is_a?(Symbol)
        return "#{key.name}:" unless key.inspect.start_with?(':"') || key.name.match?(QUOTED_NAME)

        "#{key.name.inspect}:"
      end
      private_class_method :key
    end
  end
end
