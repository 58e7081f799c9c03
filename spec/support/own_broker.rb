# frozen_string_literal: true

require "open3"

# A single broker of a spec's own (bin/kafka on ports 9192-9197 by default, data under
# tmp/kafka/9192), for specs that stop or kill the broker under a client: the
# shared one on 9092 must stay up for everyone else. Started in about 6-10 s.
# SLUICE_OWN_BROKER_PORT moves it (bin/test runs the :fd and :thread runs of these
# specs side by side, the second on 9292-9297).
module OwnBroker
  BASE_PORT = Integer(ENV.fetch("SLUICE_OWN_BROKER_PORT", "9192"))
  LISTENERS = %w[KAFKA_PORT KAFKA_CONTROLLER_PORT KAFKA_SASL_PORT KAFKA_SCRAM_PORT KAFKA_SSL_PORT KAFKA_SASL_SSL_PORT].freeze
  PORTS = LISTENERS.each_with_index.to_h { |name, offset| [name, (BASE_PORT + offset).to_s] }.freeze
  BROKERS = "127.0.0.1:#{BASE_PORT}".freeze
  KAFKA = File.expand_path("../../bin/kafka", __dir__)
  PID_FILE = File.expand_path("../../tmp/kafka/#{BASE_PORT}/kafka.pid", __dir__)

  module_function

  # @param env [Hash] more of bin/kafka's settings (KAFKA_OAUTH_JWKS_URL, say): stop it first if it runs without them
  def start(env = {}) = kafka("start", env: env)

  # Stops it (if it still runs) and deletes its data.
  def stop = kafka("stop")

  # Sends signal ("TERM": a clean shutdown, "KILL") and waits until the process is gone.
  def signal(signal, within: 30)
    pid = Integer(File.read(PID_FILE))
    Process.kill(signal, pid)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + within
    while alive?(pid)
      raise "broker #{pid} still runs #{within} s after SIG#{signal}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.05 # polling a process that is not ours to wait for
    end
  end

  # A broker that just started may not be registered with its controller
  # yet (KRaft: "only 0 broker(s) are registered") or may still be loading:
  # such refusals are asked again, within START_REFUSALS_FOR s.
  START_REFUSALS_FOR = 30

  # An admin client of it whose calls wait long enough for a broker that just started.
  def create_topic(name, partitions: 1)
    admin = Sluice::Admin.new do |config|
      config.kafka = { "bootstrap.servers": BROKERS }
      config.max_wait_timeout = 30_000
    end
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + START_REFUSALS_FOR
    begin
      admin.create_topic(name, partitions: partitions)
    rescue Sluice::Errors::KafkaCallError => e
      raise unless (e.retryable? || e.code == :invalid_replication_factor) &&
                   Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline

      warn "OwnBroker.create_topic(#{name}): #{e.message}; asking again"
      sleep 0.2 # the broker's registration has no event to wait on from here
      retry
    end
  ensure
    admin&.close
  end

  def alive?(pid)
    Process.kill(0, pid)
    true
  rescue Errno::ESRCH
    false
  end

  def kafka(*args, env: {})
    out, status = Open3.capture2e(PORTS.merge(env), KAFKA, *args)
    raise "bin/kafka #{args.join(" ")} failed:\n#{out}" unless status.success?
  end
end
