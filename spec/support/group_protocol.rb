# frozen_string_literal: true

# SLUICE_GROUP_PROTOCOL=consumer runs the specs' consumers under KIP-848's
# group protocol: every consumer config that names no "group.protocol" gets
# "consumer", and the classic protocol's member settings the specs give
# (Sluice::Consumer::Config::CLASSIC_ONLY: session timeout, heartbeat,
# assignor) are left out, as a user moving a group over would. One matrix, not
# copies of the specs: the examples that assert what only the classic
# protocol does are tagged :classic_protocol and skipped under it.
#
# Loaded by spec_helper, and through RUBYOPT by the scenario processes the
# specs start (spec/support/scenarios), so their consumers follow too. It
# takes effect once Sluice::Consumer::Config is defined, whenever that is.
module GroupProtocol
  NAME = ENV.fetch("SLUICE_GROUP_PROTOCOL", "classic")

  # @return [Boolean] the consumers run under KIP-848's protocol
  def self.consumer? = NAME == "consumer"

  # Prepended to Sluice::Consumer::Config.
  module Forced
    def validate!
      unless kafka_setting("group.protocol")
        @kafka = @kafka.reject { |key, _| self.class::CLASSIC_ONLY.key?(key.to_s) }.merge("group.protocol": "consumer")
      end
      super
    end
  end

  def self.force!(config_class)
    config_class.prepend(Forced) unless config_class < Forced
  end

  if consumer?
    if defined?(Sluice::Consumer::Config)
      force!(Sluice::Consumer::Config)
    else
      trace = TracePoint.new(:end) do |point|
        next unless point.self.is_a?(Module) && point.self.name == "Sluice::Consumer::Config"

        force!(point.self)
        trace.disable
      end
      trace.enable
    end
  end
end
