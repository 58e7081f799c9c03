# frozen_string_literal: true

# The one way a spec bounds wall-clock time (issue 45, item 5). A bound is worth having only against a
# wait it tells apart: "returned within 4 s" proves something when the call would otherwise sit out a
# 10 s timeout, and nothing when the call is merely fast. So every bound names that wait, sits clearly
# on its side of it and is generous otherwise (two shared cores, other agents' builds), and a failure
# says which wait was hit and what was measured.
module WallClock
  def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # Runs the block, expects it to return within `seconds` (and after `at_least`, if given) and returns
  # its value. guards: the wait the bound tells the call apart from ("max_wait_timeout (10 s)").
  def expect_within(seconds = nil, guards:, at_least: nil)
    started = monotonic
    value = yield
    expect_elapsed(monotonic - started, within: seconds, at_least: at_least, guards: guards)
    value
  end

  # The same for a time measured elsewhere (in a scenario's process, by a listener): within: the
  # upper bound, at_least: the lower one ("it did not return early"), guards: the wait either names.
  def expect_elapsed(elapsed, guards:, within: nil, at_least: nil)
    raise ArgumentError, "a wall-clock bound needs within: or at_least:" unless within || at_least

    expect(elapsed).to be_a(Numeric), "no time measured (#{elapsed.inspect}); guards against #{guards}"
    expect(elapsed).to be <= within, "took #{elapsed.round(3)} s, bound #{within} s: #{guards}" if within
    expect(elapsed).to be >= at_least, "returned after #{elapsed.round(3)} s, before #{at_least} s: #{guards}" if at_least
  end
end

RSpec.configure { |config| config.include WallClock }
