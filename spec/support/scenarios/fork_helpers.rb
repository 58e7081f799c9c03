# frozen_string_literal: true

# Scenario helpers for forking: in_child { ... } runs the block in a child that
# reports its Hash back through a pipe; forked_error { ... } describes what it raised.
# Runs the block in a forked child; returns [child's Hash, child's Process::Status].
def in_child
  reader, writer = IO.pipe
  pid = fork do
    reader.close
    data = begin
      yield
    rescue Exception => e # rubocop:disable Lint/RescueException
      { "child_error" => "#{e.class}: #{e.message}\n#{e.backtrace.first(5).join("\n")}" }
    end
    writer.write(JSON.generate(data))
    writer.close
  end
  writer.close
  data = JSON.parse(reader.read.then { |s| s.empty? ? "{}" : s })
  reader.close
  _, status = Process.wait2(pid)
  [data, status]
end

def forked_error(&block)
  block.call
  "no error"
rescue Sluice::Errors::BaseError => e
  { "class" => e.class.name, "closed_error" => e.is_a?(Sluice::Errors::ProducerClosedError), "message" => e.message }
end
