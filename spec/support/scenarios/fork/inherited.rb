# frozen_string_literal: true

# A scenario of spec/integration/fork/fork_spec.rb, in a process of its own.
require_relative "../setup"
require_relative "../fork_helpers"

parent = make_producer
parent.produce_sync(topic: "sluice-spec-1p", payload: "parent, before fork")
parent_poller = Sluice::Polling::Poller.instance
child, status = in_child do
  c = { "pid" => Process.pid }
  c["produce_sync"] = forked_error { parent.produce_sync(topic: "sluice-spec-1p", payload: "child via parent") }
  c["produce_async"] = forked_error { parent.produce_async(topic: "sluice-spec-1p", payload: "child via parent") }
  c["flush"] = forked_error { parent.flush(1_000) }
  c["threads_at_start"] = sluice_thread_names
  poller = Sluice::Polling::Poller.instance
  c["fresh_poller"] = !poller.equal?(parent_poller)
  c["poller_at_start"] = [poller.id, poller.count, poller.alive?]
  own = make_producer
  c["poller_with_own"] = [poller.count, poller.alive?]
  c["threads_with_own"] = sluice_thread_names
  c["own_delivers"] = own.produce_sync(topic: "sluice-spec-1p", payload: "child's own").error.nil?
  own.close
  c["poller_after_own"] = [poller.count, poller.alive?]
  parent.close # only forgets the parent's handle
  c["inherited_closed"] = parent.closed?
  c
end
result(
  "parent_pid" => Process.pid, "child" => child, "child_exit" => status.exitstatus,
  "parent_works" => parent.produce_sync(topic: "sluice-spec-1p", payload: "parent, after fork").error.nil?,
  "parent_poller" => [parent_poller.equal?(Sluice::Polling::Poller.instance), parent_poller.count, parent_poller.alive?],
  "mode" => MODE
)
parent.close
