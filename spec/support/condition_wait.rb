# frozen_string_literal: true

# The wait of every object whose writers broadcast a condition variable
# (@changed, with its mutex @lock) after each change: until a condition is
# true, at most some seconds, never sleeping.
module ConditionWait
  private

  # Under @lock: waits until the block is true.
  # @return [Boolean] false once seconds passed first
  def wait_for(seconds)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
    until yield
      left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
      return false if left <= 0

      @changed.wait(@lock, left)
    end
    true
  end
end
