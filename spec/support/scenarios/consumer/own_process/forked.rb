# frozen_string_literal: true

# A scenario of spec/integration/consumer/own_process_spec.rb, in a process of its own.
#
# A fork while a broker thread of the parent is inside getaddrinfo used to
# leave glibc's resolver lock held in the child, whose next client then
# never connected and hung in close (7 of 40 forks right after an assign
# without sluice's fork-guarded resolver). Each fork here follows a fresh
# consumer's assign, when its broker threads resolve; every close has a
# watchdog, so a hang is counted instead of timing the scenario out.
# From librdkafka 2.13 on, a broker thread also takes OpenSSL's random
# generator lock at every connect (rd_jitter's seed), which sluice cannot
# guard; under AddressSanitizer (bin/asan) its runtime's thread locks are
# caught the same way. There the child creates no client of its own.
require_relative "../../setup"
require_relative "../../fork_helpers"
require_relative "helpers"

def closes_in_time?(client) = Thread.new { client.close }.join(10) ? true : false
own_client_unsafe =
  if Gem::Version.new(Sluice.librdkafka_version) >= Gem::Version.new("2.13")
    "librdkafka #{Sluice.librdkafka_version} takes OpenSSL's lock at every connect: not fork-safe (README)"
  elsif ENV.fetch("LD_PRELOAD", "").include?("libasan")
    "AddressSanitizer's runtime locks, caught held by a fork, keep the child's new client from starting its threads"
  end

children = Array.new(40) do
  parent = make_consumer
  parent.assign("sluice-spec-idle" => [0])
  child, status = in_child do
    error = begin
      parent.poll(10)
      "no error"
    rescue Sluice::Errors::BaseError => e
      e.class.name
    end
    parent.close # forgets the parent's handle, touches nothing of it
    outcome = { "error" => error, "inherited_closed" => parent.closed? }
    next outcome if own_client_unsafe

    own = make_consumer
    own.assign("sluice-spec-idle" => [0])
    own.poll(10)
    outcome.merge("own_closed" => closes_in_time?(own))
  end
  parent.poll(10)
  child.merge("exit" => status.exitstatus, "parent_works" => !parent.closed?, "parent_closed" => closes_in_time?(parent))
end
result("own_client_unsafe" => own_client_unsafe, "children" => children.tally.map { |outcome, count| outcome.merge("count" => count) })
