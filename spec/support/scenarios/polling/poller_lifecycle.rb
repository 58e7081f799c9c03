# frozen_string_literal: true

# A scenario of spec/integration/polling/fd_poller_spec.rb, in a process of its own.
require_relative "../setup"

poller = Sluice::Polling::Poller.instance
r = { id: poller.id, idle: [poller.alive?, poller.count], idle_threads: sluice_thread_names }
first = make_producer(mode: :fd)
second = make_producer(mode: :fd)
r[:with_two] = [poller.alive?, poller.count]
r[:threads_with_two] = sluice_thread_names
r[:delivered] = [first, second].map { |p| p.produce_sync(topic: "sluice-spec-1p", payload: "life").error.nil? }
first.close
r[:after_first_close] = [poller.alive?, poller.count]
second.close
# read right after close returned: no waiting
r[:after_last_close] = [poller.alive?, poller.count]
r[:threads_after_last_close] = sluice_thread_names
third = make_producer(mode: :fd)
r[:same_instance] = Sluice::Polling::Poller.instance.equal?(poller)
r[:restarted] = [poller.alive?, poller.count]
r[:restart_delivered] = third.produce_sync(topic: "sluice-spec-1p", payload: "again").error.nil?
r[:threads_restarted] = sluice_thread_names
third.close
r[:final] = [poller.alive?, poller.count]
r[:threads_final] = sluice_thread_names
result(r)
