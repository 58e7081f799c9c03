# frozen_string_literal: true

# Shared::Blocking.call under a fiber scheduler, without a broker: a call that may not
# be cut short (a transaction's) ends before its caller goes on, however many
# times the caller's task is stopped (Fiber#raise ignores handle_interrupt).
RSpec.describe Sluice::Shared::Blocking do
  it "waits for a call that may not be cut short to end, through a second Task#stop", :async do
    inside = Queue.new
    leave = Queue.new
    order = []
    Async do
      caller = Async do
        described_class.call(interruptible: false) { (inside << true) && leave.pop && order << :call_ended }
      ensure
        order << :caller_left
      end
      inside.pop
      2.times { caller.stop } # the second lands in the wait for the helper thread
      leave << true
    end.wait

    expect(order).to eq(%i[call_ended caller_left])
  end
end
