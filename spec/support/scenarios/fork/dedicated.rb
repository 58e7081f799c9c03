# frozen_string_literal: true

# A scenario of spec/integration/fork/fork_spec.rb, in a process of its own.
require_relative "../setup"
require_relative "../fork_helpers"

dedicated = Sluice::Polling::Poller.new
parent = make_producer(mode: :fd) { |config| config.polling.poller = dedicated }
parent.produce_sync(topic: "sluice-spec-1p", payload: "parent on a dedicated poller")
child, status = in_child do
  c = { "before" => [dedicated.count, dedicated.alive?] }
  own = make_producer(mode: :fd) { |config| config.polling.poller = dedicated }
  c["with_own"] = [dedicated.count, dedicated.alive?]
  c["threads_with_own"] = sluice_thread_names
  c["own_delivers"] = own.produce_sync(topic: "sluice-spec-1p", payload: "child on the inherited poller").error.nil?
  own.close
  c["after_own"] = [dedicated.count, dedicated.alive?]
  c
end
result(
  "id" => dedicated.id, "child" => child, "child_exit" => status.exitstatus,
  "parent_works" => parent.produce_sync(topic: "sluice-spec-1p", payload: "parent, after fork").error.nil?,
  "parent_poller" => [dedicated.count, dedicated.alive?]
)
parent.close
