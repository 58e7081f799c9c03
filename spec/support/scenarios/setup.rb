# frozen_string_literal: true

# What every scenario file under spec/support/scenarios/<area>/ requires first: sluice from this
# checkout, the brokers and polling mode of the spec that runs it (SpecHelpers#run_scenario_file passes
# KAFKA_BROKERS and SLUICE_POLLING_MODE) and the helpers every scenario has. A scenario takes what the
# spec varies as ARGV or ENV, prints its outcome with `result(...)` and is run by PollingScenarios.
$LOAD_PATH.unshift(File.expand_path("../../../lib", __dir__))
require "sluice"

BROKERS = ENV.fetch("KAFKA_BROKERS")
MODE = ENV.fetch("SLUICE_POLLING_MODE").to_sym

require_relative "helpers"
