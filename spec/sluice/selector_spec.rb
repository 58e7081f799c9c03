# frozen_string_literal: true

# The native selector's contract, whichever backend was built (Selector.backend):
# bin/test runs it on the default backend, .ci/run again on SLUICE_SELECTOR=poll.
RSpec.describe Sluice::Native::Selector do
  subject(:selector) { described_class.new }

  let(:pipes) { [] }

  def pipe
    IO.pipe.tap { |pair| pipes << pair }
  end

  # `thread`, once it is inside a wait with the GVL released (status "sleep"): what the example
  # does next then reaches a wait in progress instead of racing its start.
  def blocked(thread)
    deadline = monotonic + 5
    Thread.pass until thread.status == "sleep" || !thread.alive? || monotonic > deadline
    expect(thread.status).to eq("sleep")
    thread
  end

  # Ready tokens, sorted, over waits until `expected` were all seen (a backend
  # may report them in parts) or two seconds passed.
  def ready_tokens(expected)
    seen = []
    deadline = monotonic + 2
    seen |= selector.wait(100) until (expected - seen).empty? || monotonic > deadline
    seen.sort
  end

  after do
    selector.close
    pipes.flatten.each { |io| io.close unless io.closed? }
  end

  it "is the backend this build was made with" do
    expected = ENV.fetch("SLUICE_SELECTOR", "").empty? ? nil : ENV["SLUICE_SELECTOR"].to_sym
    expected ||= RUBY_PLATFORM.include?("linux") ? :epoll : :kqueue
    expect(described_class.backend).to eq(expected)
  end

  it "returns no token when nothing is ready, after the timeout" do
    reader, = pipe
    selector.add(reader.fileno, 1)
    expect_within(2, at_least: 0.04, guards: "returning before the 50 ms timeout, or 50 taken as seconds") do
      expect(selector.wait(50)).to eq([])
    end
  end

  it "returns the tokens of the ready fds, without reading them (level-triggered)" do
    readers = Array.new(3) { |i| pipe.first.tap { |r| selector.add(r.fileno, i + 10) } }
    pipes[0][1].write("x")
    pipes[2][1].write("y")

    expect(ready_tokens([10, 12])).to eq([10, 12])
    expect(ready_tokens([10, 12])).to eq([10, 12]) # still ready: the selector read nothing
    expect(readers[0].read_nonblock(10)).to eq("x")
    expect(ready_tokens([12])).to eq([12])
  end

  it "counts registrations, refuses duplicates, and forgets removed fds" do
    reader, writer = pipe
    other, = pipe
    selector.add(reader.fileno, 1)
    selector.add(other.fileno, 2)
    expect(selector.count).to eq(2)
    expect { selector.add(reader.fileno, 3) }.to raise_error(Errno::EEXIST)

    expect(selector.remove(reader.fileno)).to be(true)
    expect(selector.remove(reader.fileno)).to be(false)
    expect(selector.count).to eq(1)
    writer.write("x")
    expect(selector.wait(50)).to eq([])
  end

  it "refuses a closed fd and a token outside 0..2**31-1" do
    reader, = pipe
    expect { selector.add(reader.fileno, -1) }.to raise_error(RangeError)
    expect { selector.add(reader.fileno, 2**31) }.to raise_error(RangeError)
    fd = reader.fileno
    reader.close
    expect { selector.add(fd, 1) }.to raise_error(Errno::EBADF)
    expect(selector.count).to eq(0)
  end

  it "reports every ready fd among hundreds" do
    tokens = Array.new(300) { |i| pipe.first.then { |r| selector.add(r.fileno, i) } }
    pipes.each { |_, w| w.write("x") }
    expect(ready_tokens(tokens)).to eq(tokens)
  end

  it "ends a wait when #wakeup is called from another thread, and consumes that wake-up" do
    waiter = blocked(Thread.new { selector.wait(10_000) })
    selector.wakeup
    expect(waiter.join(5)).to eq(waiter) # ended by the wake-up, not by its 10 s timeout
    expect(waiter.value).to eq([])
    expect(selector.wait(50)).to eq([]) # the wake-up was consumed: this one times out
  end

  it "returns at once from a wait after an earlier #wakeup" do
    selector.wakeup
    selector.wakeup
    expect_within(1, guards: "the 5 s timeout: the earlier wake-up lost") do
      expect(selector.wait(5_000)).to eq([])
    end
  end

  it "sees an fd added by another thread during a wait (this wait or the caller's next)" do
    reader, writer = pipe
    writer.write("x")
    waiter = Thread.new do
      seen = []
      seen = selector.wait(5_000) while seen.empty?
      [seen, monotonic]
    end
    blocked(waiter)
    added_at = monotonic
    selector.add(reader.fileno, 7)
    seen, seen_at = waiter.value
    expect(seen).to eq([7])
    expect_elapsed(seen_at - added_at, within: 3, guards: "the 5 s timeout: the added fd seen only by a later wait")
  end

  it "is interrupted by Thread#raise and Thread#kill, and still works afterwards" do
    # A wait may also end early with no token (EINTR: CI once saw one end within 0.1 s), so each
    # thread waits in a loop, which only an interrupt ends; join's 5 s bound is half one wait.
    wait_forever = -> { loop { selector.wait(10_000) } }
    waiter = blocked(Thread.new(&wait_forever))
    waiter.report_on_exception = false
    waiter.raise(RuntimeError, "stop waiting")
    expect { waiter.join(5) }.to raise_error(RuntimeError, "stop waiting")
    killed = blocked(Thread.new(&wait_forever))
    expect(killed.kill.join(5)).to eq(killed)

    reader, writer = pipe
    selector.add(reader.fileno, 3)
    writer.write("x")
    expect(ready_tokens([3])).to eq([3])
  end

  it "refuses every call but #close once closed; #close is idempotent" do
    selector.close
    expect { selector.wait(0) }.to raise_error(IOError)
    expect { selector.add(0, 1) }.to raise_error(IOError)
    expect { selector.count }.to raise_error(IOError)
    expect { selector.close }.not_to raise_error
  end

  it "releases its fds on #close and when collected without it", if: File.directory?("/proc/self/fd") do
    # The process's fds by number and what each is: other threads of the process (a client's teardown that
    # finishes in the background) open and close fds meanwhile, so a count alone fails on theirs (45 before,
    # 42 after, in a full run).
    link = lambda do |fd|
      File.readlink("/proc/self/fd/#{fd}")
    rescue Errno::ENOENT # closed while listed (the listing's own fd)
      nil
    end
    fds = -> { Dir.children("/proc/self/fd").to_h { |fd| [fd, link.call(fd)] }.compact }
    kind = ->(target) { target.sub(/:\[\d+\]\z/, "") } # "pipe:[123]" -> "pipe"; "anon_inode:[eventpoll]" stays
    # libkqueue (kqueue on Linux) releases a closed kqueue's fds from a thread of its own, a little later
    settled = lambda do |&released|
      deadline = monotonic + 2
      sleep 0.05 until released.call || monotonic > deadline
      released.call
    end
    before = fds.call
    selector = described_class.new
    own = fds.call.reject { |fd, target| before[fd] == target }
    expect(own).not_to be_empty
    selector.close
    expect(settled.call { (fds.call.to_a & own.to_a).empty? }).to be(true), "still open after #close: #{fds.call.to_a & own.to_a}"
    # Collected: counted by the kinds of fd a selector makes (an epoll, kqueue's, a pipe), which the
    # process's other threads seldom open meanwhile.
    kinds = own.values.map(&kind).uniq
    counted = -> { fds.call.values.count { |target| kinds.include?(kind.call(target)) } }
    base = counted.call
    # Made on a thread of their own, so no stale reference on this stack keeps
    # one alive through GC's conservative stack scan (seen in a full run).
    Thread.new { 20.times { described_class.new } }.join
    3.times { GC.start }
    expect(settled.call { counted.call <= base }).to be(true), "#{counted.call - base} of #{kinds} still open after GC"
  end

  it "creates only close-on-exec, non-blocking fds", if: File.directory?("/proc/self/fdinfo") do
    open_fds = -> { Dir.children("/proc/self/fd").select { |fd| File.exist?("/proc/self/fdinfo/#{fd}") } } # not the listing's own
    before = open_fds.call
    other = described_class.new
    created = open_fds.call - before
    flags = created.to_h { |fd| [fd, File.read("/proc/self/fdinfo/#{fd}")[/^flags:\s*(\d+)/, 1].to_i(8)] }
    expect(created).not_to be_empty
    expect(flags.values).to all(satisfy { |f| f.allbits?(0o2000000) }) # O_CLOEXEC
    # A kqueue fd is never read or written, and macOS refuses O_NONBLOCK on it.
    expect(flags.values).to all(satisfy { |f| f.allbits?(File::NONBLOCK) }) unless described_class.backend == :kqueue
  ensure
    other&.close
  end

  it "lets a forked child close its copy without touching the parent's registrations" do
    reader, writer = pipe
    selector.add(reader.fileno, 5)
    pid = fork do
      codes = []
      codes << (begin
        selector.wait(0)
      rescue Sluice::Errors::ForkedProcessError
        1
      end)
      selector.close
      exit!(codes == [1] ? 0 : 1)
    end
    _, status = Process.wait2(pid)
    expect(status.exitstatus).to eq(0)
    writer.write("x")
    expect(ready_tokens([5])).to eq([5])
    expect(selector.count).to eq(1)
  end
end
