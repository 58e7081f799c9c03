# frozen_string_literal: true

require "fileutils"
require "set"
require_relative "../../spec/support/worker_supervisor"

module Upgrade
  # The producers, the classic group's members and the lag poller of a run,
  # each a process of its own (ConsumerGroups::Worker: bench/upgrade/client.rb,
  # spec/support/scenarios/crash_consumer.rb), and what their lines said: when
  # each one last succeeded (an acked message, a message handed out, a lag
  # answered), its errors, what was acked and seen (WorkerSupervisor: one
  # thread reads every line; the run waits on a condition, never on the clock).
  class Clients < WorkerSupervisor
    CLIENT = File.expand_path("client.rb", __dir__)

    Client = Struct.new(:kind, :name, :worker, :successes, :errors, :last_error_at, :owned, :started_at, :finished, :exited) do
      def last_success_at = successes.last
    end

    attr_reader :acked, :seen, :produced, :exits

    def initialize(env)
      super()
      @env = env
      @clients = []
      @exits = [] # [name, stderr] of a client that exited on its own
      @acked = Hash.new { |hash, name| hash[name] = [] } # producer name => numbers acked
      @seen = Hash.new(0) # payload => times a group member handed it out
      @produced = {} # producer name => messages it produced
      start_reading
    end

    # @param kind [Symbol] :producer, :consumer (crash_consumer.rb) or :lag
    def start(kind, name, env = {})
      script = kind == :consumer ? ConsumerGroups::Worker::SCRIPT : CLIENT
      env = @env.merge("KIND" => kind.to_s, "NAME" => name).merge(env)
      @lock.synchronize do
        client = Client.new(kind, name, nil, [], [], nil, Set.new, now, false, false)
        client.worker = ConsumerGroups::Worker.new(env, @lines, script: script)
        @clients << client
        client
      end
    end

    # Closes its stdin and waits until it has closed its client and exited,
    # and its last line has been read (a producer's count).
    # @return [Process::Status]
    def finish(client, timeout = 60)
      @lock.synchronize { client.finished = true }
      status = client.worker.finish(timeout)
      await("#{client.name}'s last line read", 10) { client.exited }
      status
    end

    def finish_all(kind = nil) = of(kind).map { |client| [client.name, finish(client)] }

    def kill_all = @lock.synchronize { @clients.dup }.each { |client| client.worker.kill if client.worker.running? }

    # The live clients (of a kind).
    def of(kind = nil) = @lock.synchronize { live.select { |client| kind.nil? || client.kind == kind } }

    # Every live client succeeded after time. Under the lock.
    def all_succeeded_since?(time) = live.all? { |client| (client.last_success_at || 0) > time }

    # Partitions the live members own. Under the lock.
    def owned = live.select { |client| client.kind == :consumer }.map(&:owned).reduce(Set.new, :|)

    # { kind => the longest time (s) one client of that kind went without a
    # success between from and till }: a success after till ends a pause, a
    # client that has none lasts until till.
    def longest_stalls(from, till)
      @lock.synchronize do
        live.group_by(&:kind).transform_values do |clients|
          clients.map { |client| longest_pause(client.successes, [from, client.started_at].max, till) }.max
        end
      end
    end

    # Clients whose last word was an error, or that had no success since time.
    # @return [Array<String>] their names and why
    def failing_since(time)
      @lock.synchronize do
        live.filter_map do |client|
          if (client.last_success_at || 0) <= time then "#{client.name}: no success since the roll"
          elsif client.last_error_at && client.last_error_at > client.last_success_at then "#{client.name}: #{client.errors.last}"
          end
        end
      end
    end

    # @return [Hash{String => Hash{String => Integer}}] client name => { error => times }, of the clients that had any
    def errors
      @lock.synchronize do
        @clients.select { |client| client.errors.any? }.to_h { |client| [client.name, client.errors.map { |e| e.to_s[0, 160] }.tally] }
      end
    end

    # The delivery reports producer name gave its number n: "acked" as often as
    # it said so, then each "failed ERROR".
    # @return [Array<String>]
    def reports(name, number)
      @lock.synchronize do
        failed = @clients.select { |client| client.name == name }.flat_map(&:errors).filter_map do |error|
          "failed #{error.delete_prefix("#{number} ")}" if error.start_with?("#{number} ")
        end
        (["acked"] * @acked[name].count(number)) + failed
      end
    end

    # Clients whose end was not asked for. Under the lock.
    def live = @clients.reject(&:finished)

    # Each client's stderr into dir/NAME.err (every client has exited).
    def write_stderr(dir)
      FileUtils.rm_rf(dir)
      FileUtils.mkdir_p(dir)
      @lock.synchronize { @clients.dup }.each { |client| File.write(File.join(dir, "#{client.name}.err"), client.worker.stderr_output) }
    end

    public :stop_reading

    # One line per live client: its last success and error. Under the lock.
    def state
      live.map do |client|
        ago = client.last_success_at ? format("%.1fs ago", now - client.last_success_at) : "never"
        "#{client.name}: last success #{ago}, #{client.errors.size} errors #{client.errors.last}"
      end.join("; ")
    end

    private

    def raise_exited
      raise "a client exited on its own: #{@exits.map { |name, err| "#{name}:\n#{err}" }.join("\n")}" unless @exits.empty?
    end

    def record(worker, line)
      client = @clients.find { |c| c.worker.equal?(worker) }
      return unless client
      return exited(client) if line == :exited

      word, rest = line.split(" ", 2)
      case word
      when "acked" then success(client) { @acked[client.name] << Integer(rest) }
      when "seen" then success(client) { @seen[rest] += 1 }
      when "lag" then success(client)
      when "failed", "error" then error(client, rest)
      when "produced" then @produced[client.name] = Integer(rest)
      when "assigned" then client.owned.merge(numbers(rest))
      when "revoked" then client.owned.subtract(numbers(rest))
      end
    end

    def success(client)
      yield if block_given?
      client.successes << now
    end

    def error(client, message)
      client.errors << message
      client.last_error_at = now
    end

    def exited(client)
      client.exited = true
      client.owned.clear
      @exits << ["#{client.name} (#{client.worker.status})", client.worker.stderr_output] unless client.finished
    end
  end
end
