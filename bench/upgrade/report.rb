# frozen_string_literal: true

module Upgrade
  # What bin/test-upgrade prints and writes: each phase's time as it ends, the
  # stalls of each step (node restart, finalization, member restart) per client
  # kind, the counts, and the verdict.
  class Report
    KINDS = %i[producer transactional consumer lag].freeze

    attr_writer :features, :unclean_exits, :bumps, :not_leader
    attr_accessor :failing

    def initialize(options)
      @options = options
      @started = now
      @phases = [] # [name, seconds]
      @steps = [] # [name, { step:, stalls:, group: }]
      @failing = []
      @unclean_exits = []
      @counts = {}
      @evidence = {} # input duplicate's payload => lines (bench/upgrade/duplicates.rb)
      @bumps = {} # producer name => its epoch bumps ["time PID{...}", ...]
    end

    def phase(name, seconds, result)
      @phases << [name, seconds.round(1)]
      @steps << [name, result] if result.is_a?(Hash)
      stalls = result.is_a?(Hash) ? "; longest stall #{KINDS.map { |kind| format("#{kind} %.1fs", result[:stalls][kind] || 0) }.join(", ")}" : ""
      group = result.is_a?(Hash) && result[:group] ? "; group #{result[:group]}" : ""
      puts format("== %<name>s: %<seconds>.1fs%<stalls>s%<group>s", name: name, seconds: seconds, stalls: stalls, group: group)
    end

    # input, output: [payload, partition, offset] of each message read back.
    # Returns the input's duplicates ([payload, [[partition, offset], ...]]), for #explain.
    # The input is held to what the producers produced (each number once),
    # the output to the input (each message copied once: a duplicate in the
    # input is a producer's, not the transactions').
    def count(input:, output:, expected:, seen:, errors:, eos_failed:)
      @counts = { messages: expected.size, input: tally(input, expected.tally), output: tally(output, input.map(&:first).tally),
                  group_missed: expected.count { |payload| !seen.key?(payload) },
                  group_redelivered: seen.values.sum - seen.size, client_errors: errors,
                  failed_transactions: eos_failed.values.sum, transaction_errors: eos_failed.transform_keys { |e| e.to_s[0, 160] } }
      @counts.dig(:input, :duplicates)
    end

    # What was found of an input duplicate's path, printed under it.
    def explain(payload, lines)
      @evidence[payload] = lines
    end

    # Prints the table and the verdict, writes the JSON.
    # @return [Boolean] nothing lost or duplicated, no client left failing
    def finish
      print_table
      verdict = problems
      known = @counts.dig(:input, :duplicated)
      if known.positive? && @options[:known_input_duplicates]
        puts "upgrade: KNOWN OPEN DEFECT (not counted as a failure, --known-input-duplicates): " \
             "an idempotent producer wrote #{known} message(s) twice (see the places above)"
      end
      puts(verdict.empty? ? "upgrade: OK" : "upgrade: FAILED: #{verdict.join("; ")}")
      write_json(verdict)
      verdict.empty?
    end

    private

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

    # lost: fewer copies than expected; duplicated: more; unexpected: none expected.
    # duplicates: where the extra copies are ([payload, [[partition, offset], ...]], the first 10).
    def tally(messages, expected)
      at = messages.group_by(&:first)
      counts = at.transform_values(&:size)
      extra = counts.select { |payload, n| expected.key?(payload) && n > expected[payload] }
      { read: messages.size, lost: expected.sum { |payload, n| [n - counts.fetch(payload, 0), 0].max },
        duplicated: extra.sum { |payload, n| n - expected[payload] }, unexpected: counts.count { |payload, _| !expected.key?(payload) },
        duplicates: extra.keys.first(10).map { |payload| [payload, at[payload].map { |_, partition, offset| [partition, offset] }] } }
    end

    def problems
      input = @counts.fetch(:input)
      output = @counts.fetch(:output)
      list = []
      list << "#{input[:lost]} lost in the input" if input[:lost].positive?
      list << "#{input[:duplicated]} duplicated in the input" if input[:duplicated].positive? && !@options[:known_input_duplicates]
      list << "#{output[:lost]} lost, #{output[:duplicated]} duplicated, #{output[:unexpected]} unexpected in the output" if
        (output[:lost] + output[:duplicated] + output[:unexpected]).positive?
      list << "#{@counts[:group_missed]} never handed out by the group" if @counts[:group_missed].positive?
      list << "still failing after the roll: #{@failing.join(", ")}" if @failing.any?
      list << "closed uncleanly: #{@unclean_exits.join(", ")}" if @unclean_exits.any?
      list
    end

    def print_table
      header = format("%-50s %7s %s", "step", "took", KINDS.map { |kind| format("%14s", kind) }.join)
      puts "", "longest stall (s without a success) per client kind; took: until every partition's ISR was full (a node), " \
               "the tool returned (features), every partition was owned again (a member)", header, "-" * header.size
      @steps.each do |name, result|
        stalls = KINDS.map { |kind| format("%14.1f", result[:stalls][kind] || 0) }.join
        puts format("%-50s %6.1fs %s", name, result[:step], stalls)
      end
      input = @counts[:input]
      output = @counts[:output]
      puts "", format("messages %<n>d; input (read_uncommitted): read %<ir>d, lost %<il>d, duplicated %<id>d; " \
                      "output (read_committed): read %<or>d, lost %<ol>d, duplicated %<od>d, unexpected %<ou>d",
                      n: @counts[:messages], ir: input[:read], il: input[:lost], id: input[:duplicated],
                      or: output[:read], ol: output[:lost], od: output[:duplicated], ou: output[:unexpected])
      [[:input, input], [:output, output]].each do |topic, counts|
        counts[:duplicates].each do |payload, places|
          puts "  #{topic}: #{payload} at #{places.map { |p, o| "#{p}/#{o}" }.join(", ")}"
          puts(@evidence.fetch(payload, []).map { |line| "    #{line}" }) if topic == :input
        end
      end
      print_bumps
      puts format("group: missed %<m>d, handed out again %<r>d (at least once); failed transactions %<t>d",
                  m: @counts[:group_missed], r: @counts[:group_redelivered], t: @counts[:failed_transactions])
      print_errors
      puts "features: #{@features}", "still failing after the roll: #{@failing.empty? ? "none" : @failing.join(", ")}",
           format("total %.1fs", now - @started)
    end

    def print_bumps
      bumps = @bumps.map { |name, times| "#{name} #{times.size}#{" (#{times.join(", ")})" if times.any?}" }
      puts "idempotent producers' epoch bumps (a write retried after one may be written again): #{bumps.join(", ")}"
      puts "batches answered Not leader: #{@not_leader[0]}, of them written by that leader: #{@not_leader[1]}" if @not_leader
    end

    def print_errors
      errors = @counts[:client_errors].merge(@counts[:transaction_errors].empty? ? {} : { "transactional" => @counts[:transaction_errors] })
      return puts("client errors: none") if errors.empty?

      puts "client errors (each kind of error once, with how often):"
      errors.each { |name, tally| tally.each { |error, times| puts "  #{name}: #{times}x #{error}" } }
    end

    def write_json(verdict)
      File.write(@options[:json], JSON.pretty_generate(
                                    from: @options[:from], to: @options[:to], ok: verdict.empty?, problems: verdict,
                                    phases: @phases.to_h, steps: @steps.to_h, counts: @counts, evidence: @evidence,
                                    epoch_bumps: @bumps, not_leader: @not_leader, features: @features, failing: @failing,
                                    unclean_exits: @unclean_exits, seconds: (now - @started).round(1)
                                  ))
    end
  end
end
