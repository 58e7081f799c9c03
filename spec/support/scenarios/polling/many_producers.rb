# frozen_string_literal: true

# A scenario of spec/integration/polling/polling_modes_spec.rb, in a process of its own.
require_relative "../setup"

before = Thread.list.select(&:alive?)
producers = Array.new(25) { |i| make_producer(id: "many-#{i}") }
added = Thread.list.select(&:alive?) - before
reports = producers.map { |producer| producer.produce_sync(topic: "sluice-spec-many", payload: producer.id) }
poller = Sluice::Polling::Poller.instance
during = { count: poller.count, alive: poller.alive? }
producers.each(&:close)
result(
  mode: MODE, ids: producers.map(&:id), added: added.size, added_names: added.map(&:name).sort,
  delivered: reports.count { |r| r.error.nil? && r.offset >= 0 },
  offsets: reports.map(&:offset).uniq.size, poller: during,
  left_after_close: (Thread.list.select(&:alive?) - before).map(&:name)
)
