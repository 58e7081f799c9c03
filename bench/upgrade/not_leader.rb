# frozen_string_literal: true

# Which batches a partition leader answered "Not leader for partition" although
# it had written them, after a bin/test-upgrade run (issue 55, item 3):
#
#   bin/test-upgrade --dump-input tmp/input.dump
#   ruby bench/upgrade/not_leader.rb tmp/input.dump tmp/upgrade/p0.err tmp/upgrade/p1.err
#
# librdkafka files that answer as "not persisted" (MsgNotPersisted) and sends
# the batch again. Under the same producer epoch the new leader recognises it
# (a duplicate sequence) and answers with the first write's offset; after an
# epoch bump it has a new sequence and is written a second time
# (confluentinc/librdkafka#4953). A batch counts as written by the broker that
# refused it when another broker acknowledged its retry but the log holds it
# (producer id, epoch, base sequence) at a partition leader epoch under which
# the refusing broker acknowledged other batches.
module Upgrade
  # Reads the input's batches (DumpLogSegments without --deep-iteration) and a
  # producer's debug log (eos,msg).
  class NotLeader
    BATCH = /in \[(\d+)\]: MessageSet with \d+ message\(s\) \(MsgId \d+, BaseSeq (\d+)\) (delivered|encountered error: Broker: Not leader)/

    def initialize(dump)
      @leader_epochs = Hash.new { |hash, partition| hash[partition] = {} } # partition => { [pid, epoch, seq] => leader epoch }
      partition = nil
      File.foreach(dump) do |line|
        partition = Integer(line[%r{-(\d+)/\d+\.log}, 1]) if line.start_with?("Dumping")
        next unless line.start_with?("baseOffset:")

        fields = line.scan(/(\w+): (\S+)/).to_h
        @leader_epochs[partition][fields.values_at("producerId", "producerEpoch", "baseSequence")] = fields["partitionLeaderEpoch"]
      end
    end

    # @return [Array<String>] one line per refused batch, the written ones marked
    def refusals(log)
      pids = {} # partition => [producer id, epoch], from librdkafka's NEWPID lines
      writers = Hash.new { |hash, partition| hash[partition] = {} } # partition => { leader epoch => broker that acked there }
      refused = []
      acked = {} # [partition, key] => the broker whose answer delivered it
      File.foreach(log) do |line|
        if (pid = line.match(/in \[(\d+)\] changed PID\{[^}]*\} -> PID\{Id:(\d+),Epoch:(\d+)\}/))
          pids[Integer(pid[1])] = [pid[2], pid[3]]
        elsif (batch = line.match(BATCH)) && pids[partition = Integer(batch[1])]
          key = [*pids[partition], batch[2]]
          broker = line[%r{thrd:([\d.:]+/\d+)\]}, 1]
          if batch[3] == "delivered"
            writers[partition][@leader_epochs[partition][key]] ||= broker
            acked[[partition, key]] = broker
          else
            refused << [line[0, 12], partition, key, broker]
          end
        end
      end
      refused.uniq { |_, *rest| rest }.map do |time, partition, key, broker|
        # acked by another broker (the retry, recognised) yet in the log at this one's leader epoch
        written = writers[partition][@leader_epochs[partition][key]] == broker && acked[[partition, key]] != broker
        "#{time} [#{partition}] producer/epoch/sequence #{key.join("/")} refused by #{broker}#{": WRITTEN by it" if written}"
      end
    end
  end
end

if $PROGRAM_NAME == __FILE__
  not_leader = Upgrade::NotLeader.new(ARGV.fetch(0))
  lines = ARGV.drop(1).flat_map { |log| not_leader.refusals(log).map { |line| "#{File.basename(log)} #{line}" } }
  puts lines, "#{lines.size} batches answered Not leader; #{lines.grep(/WRITTEN/).size} of them written by the broker that said so"
end
