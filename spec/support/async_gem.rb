# frozen_string_literal: true

# Debian builds ruby-async for its default Ruby only: a root's other Ruby (sid's ruby3.4, bin/test-root) has
# none. Unit spec files that test a few moves under a fiber scheduler tag those examples :async, so the rest
# of each file still runs there; the examples say why they skip.
module AsyncGem
  AVAILABLE = begin
    require "async" # Debian's ruby-async (1.30): Async::Scheduler is a Fiber.scheduler
    true
  rescue LoadError # Gem::MissingSpecError too: the gem's dependencies are not built for this Ruby
    false
  end
end

RSpec.configure do |config|
  config.before(:each, :async) do
    skip("no async gem for Ruby #{RUBY_VERSION} (Debian builds it for its default Ruby only)") unless AsyncGem::AVAILABLE
  end
end
