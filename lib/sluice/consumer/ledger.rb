# frozen_string_literal: true

module Sluice
  class Consumer
    # Where each drained message is, and every move between those places: the
    # hand-off invariant of Consumer::Inbox as a pure object (no broker, no
    # threads, no clock), so that it can be tested by breaking in at every
    # step, and shared by Sluice::Testing::Consumer.
    #
    # The invariant: a message taken from librdkafka is, at every instant, in
    # exactly one of five places (buffered, lent, handed, done, rewound), and
    # an offset leaves through #storable! only when no message of its
    # partition below it is buffered, lent, handed or rewound. So the stored
    # (and committed) offset of a partition never passes a message whose
    # block has not finished, whatever order blocks finish in: the lowest
    # unfinished offset rules.
    #
    # - buffered: drained, not handed out (#fill, #append; #lend takes the next);
    # - lent: out of the buffer, not finished (#lent, in the order lent);
    # - handed: returned by poll(store: true), the application's until it
    #   reads again (#handed: Native::Handoff#poll moves it there from lent;
    #   #finish_handed);
    # - done: finished (#finish, #finish_handed), its offset not stored yet;
    #   held back while a lower offset of its partition is lent or handed
    #   (blocks running in parallel finish out of order);
    # - rewound: dropped (#drop, #rewound, #return_lent): librdkafka goes back to
    #   it, the next owner reads it, or it is buffered again.
    #
    # Each move is written so that an interrupt between any two of its steps
    # costs at most a message handed out twice or an offset stored later,
    # never one skipped: a message is added to its new place before it leaves
    # its old one, and an offset is forgotten before it would be stored.
    #
    # What is done and held back is not lost to a crash: #finished_above
    # names it, per partition, for the stored offset's metadata
    # (FinishedOffsets), and a member that reads the partition next is told
    # of it (#skip): those messages go straight to done when drained, as if
    # their blocks had run again.
    class Ledger
      # Nothing (shared, frozen).
      EMPTY = [].freeze

      # The lent messages in the order lent. Native::Handoff#poll pops the last
      # one (just lent) as it returns it: the Array itself, not a copy.
      # @return [Array<Message>]
      attr_reader :lent

      # What poll(store: true) returned and the application has not come back
      # from yet (one message at most): the Array itself, which
      # Native::Handoff#poll pushes onto.
      # @return [Array<Message>]
      attr_reader :handed

      # What Native::Handoff#poll hands a message over from, built once and
      # frozen: [lent, handed] (poll(store: true): the message goes on to
      # handed) and [lent, nil] (it leaves the ledger: the application stores it).
      # @return [Array(Array<Message>, Array<Message>, nil)]
      attr_reader :storing_lease, :plain_lease

      def initialize
        @items = EMPTY
        @at = 0
        @lent = []
        @handed = []
        @done = []
        @bases = {} # [topic, partition] => the offset last stored (or committed at assignment)
        @skips = {} # [topic, partition] => { offset => true }: finished by an earlier member
        @learned = {} # [topic, partition] => true: #skip was told of it
        @unstarted = {} # topic => { partition => true }: assigned, nothing drained of it yet (see #assigned)
        @starts = [] # [topic, partition, offset, nil]: first offsets drained, not taken by #starts! yet
        @tracking = false # see #tracking=
        @skipped = false # a message was skipped (done) while lower ones may still be buffered
        @storing_lease = [@lent, @handed].freeze
        @plain_lease = [@lent, nil].freeze
      end

      # Something is buffered.
      def buffered? = @at < @items.size

      # How many items are buffered.
      def buffered_size = @items.size - @at

      # The next buffered item (a Message or a control item), or nil.
      def peek = @items[@at]

      # Passes the next item without lending it (a control item).
      def pass = @at += 1

      # One item before the rest of the buffer: a control item to answer first.
      def prepend(item)
        @items = @items.drop(@at).unshift(item)
        @at = 0
      end

      # Lends the next buffered item: lent, then out of the buffer (see #return_lent).
      # @return [Message]
      def lend
        item = @items[@at]
        @lent << item
        @at += 1
        item
      end

      # #lend when the next item is a message, else nil (nothing buffered, or a control item to answer).
      def lend_message
        item = @items[@at]
        return unless item.is_a?(Message)

        @lent << item
        @at += 1
        item
      end

      # A new buffer, once the old one was handed out.
      # @param items [Array] messages and control items, in the order drained
      def fill(items)
        @items = @skips.empty? ? items : skipping(items)
        @at = 0
      end

      # One more item at the end of the buffer.
      def append(item)
        return if !@skips.empty? && skipping([item]).empty?

        @items = @items[@at..] << item
        @at = 0
      end

      # An earlier member finished these offsets of a partition above its
      # committed offset (FinishedOffsets): drained, they go straight to done.
      # @param committed [Integer] the partition's committed offset (where the
      #   metadata is stored again while nothing lower is done: see #finished_above)
      def skip(topic, partition, committed, offsets)
        pair = [topic, partition]
        @learned[pair] = true
        @bases[pair] = committed if committed >= 0
        @skips[pair] = offsets.to_h { |offset| [offset, true] } unless offsets.empty?
      end

      # The group assigned these partitions and never committed them: the
      # first message drained of each is where the group's next member must
      # start while nothing of it is finished (#starts!).
      # @param pairs [Array<Array(String, Integer)>]
      def assigned(pairs)
        pairs.each { |topic, partition| (@unstarted[topic] ||= {})[partition] = true }
      end

      # Some partition #assigned has had nothing drained yet: #drained wants to know of drains.
      def awaiting_starts? = !@unstarted.empty?

      # Messages were drained (into the buffer, #fill or #append): the first
      # offset of each partition among them (Native::Consumer#first_offsets).
      # For a partition #assigned and not drained from since, that is its
      # start, and the base of what finishes above it (#finished_above)
      # until an offset is stored there.
      # @param firsts [Array<Array(String, Integer, Integer)>]
      def drained(firsts)
        firsts.each do |topic, partition, offset|
          next unless (partitions = @unstarted[topic]) && partitions.delete(partition)

          @unstarted.delete(topic) if partitions.empty?
          @starts << [topic, partition, offset, nil]
          @bases[[topic, partition]] ||= offset
        end
      end

      # The first offset drained of each partition #assigned since the last
      # call, to commit at once: [topic, partition, offset, nil]. A partition
      # the group never committed has no start of its own until a block
      # finishes there; meanwhile a member taking it over starts at
      # auto.offset.reset: from the log's start (earliest: everything read
      # again) or its end (latest: everything fetched here skipped). Taken
      # as drained, before anything of the partition is handed out, so
      # nothing the application stored or committed there is moved back by
      # it; the lowest unfinished offset, so it passes nothing.
      # @return [Array<Array(String, Integer, Integer, nil)>]
      def starts!
        return EMPTY if @starts.empty?

        starts = @starts
        @starts = []
        starts
      end

      # Keeps what #finished_above needs (the offset each partition stored
      # last): a concurrent read's, whose blocks finish out of order; other
      # reads do not pay for it.
      attr_writer :tracking

      # (see #tracking=)
      def tracking? = @tracking

      # Those of the partitions #skip was not told of since they were assigned.
      # @param pairs [Array<Array(String, Integer)>]
      def unlearned(pairs) = pairs.reject { |pair| @learned[pair] }

      # The offsets to store again with metadata: for each partition with done
      # messages held back above its lowest unfinished one, [topic, partition,
      # base, metadata], where base is the offset stored last (by #storable!'s
      # caller: the offset after its highest ready message, remembered here)
      # or committed at assignment, and metadata names the held offsets
      # (FinishedOffsets). Partitions with no base known, or with an
      # unfinished message below it (a seek back), are left out.
      # @param ready [Array<Message>] what #storable! returned just before
      # @return [Array<Array(String, Integer, Integer, String)>]
      def finished_above(ready)
        return EMPTY unless @tracking

        note_stored(ready)
        return EMPTY if @done.empty?

        floors = lowest(unfinished)
        @done.group_by { |message| partition_of(message) }.filter_map do |(topic, partition), held|
          base = @bases[[topic, partition]] or next
          next if (floor = floors[[topic, partition]]) && floor < base # a seek went back below it: not stored past that

          metadata = FinishedOffsets.encode(base, held.map(&:offset)) or next
          [topic, partition, base, metadata]
        end
      end

      # The application finished message: done, then no longer lent (an
      # interrupt between the two leaves it in both: handed out again, and held
      # back by itself meanwhile). A message no longer lent (its partition was
      # revoked, or it was rewound) is not done: its offset is not ours to store.
      # @return [Boolean] it was lent
      def finish(message)
        index = @lent.last.equal?(message) ? @lent.size - 1 : Native::Handoff.lent_index(@lent, message)
        return false unless index

        @done << message
        @lent.delete_at(index)
        true
      end

      # The application came back from what poll(store: true) handed it:
      # done, then no longer handed (an interrupt between the two leaves it in
      # both: done once more later, the same offset stored again).
      def finish_handed
        return if @handed.empty?

        @done.concat(@handed)
        @handed.clear
      end

      # Something is done and not stored.
      def done? = !@done.empty?

      # Takes the done messages whose offsets may be stored now: those below
      # the lowest lent or handed offset of their partition. Forgotten here
      # before the caller stores them: interrupted between the two, an offset
      # is stored later (by a higher one), never too far.
      # (After a seek back, offsets finished before it may thus be stored
      # above those read since: they were finished, so none is skipped.)
      # @return [Array<Message>] in the order finished, not sorted: the caller
      #   stores each partition's highest (Native::Consumer#store_offsets
      #   does; sorting cost each_message 0.12 µs a message)
      def storable!
        return EMPTY if @done.empty?

        @skipped = false if @skipped && !buffered?
        if @lent.empty? && @handed.empty? && !@skipped
          ready = @done
          @done = []
          return ready
        end

        floors = offsets_by_topic(unfinished)
        ready, @done = @done.partition { |message| (floor = floors[message.topic]&.[](message.partition)).nil? || message.offset < floor }
        ready
      end

      # No longer lent, not finished: batches stored by their caller, messages
      # a seek went back before.
      def unlend(messages)
        return @lent.clear if messages.size == @lent.size && messages.first.equal?(@lent.first) && messages.last.equal?(@lent.last)

        gone = messages.to_h { |message| [message.__id__, true] }
        @lent.reject! { |message| gone[message.__id__] }
      end

      # The messages were not finished and their partitions go back to their
      # lowest offsets (a seek the caller makes): what is done at or above
      # those is forgotten first (it is read again, so storing it would pass
      # the rewound ones), then they are no longer lent.
      # @return [Array<Array(String, Integer, Integer)>] each partition's lowest offset
      def rewound(messages)
        firsts = lowest(messages)
        forget_done { |message| (floor = firsts[partition_of(message)]) && message.offset >= floor }
        unlend(messages)
        firsts.map { |(topic, partition), offset| [topic, partition, offset] }
      end

      # What is still lent when a read begins was not finished (an interrupt
      # landed between the buffer and the application): back to the front of
      # the buffer, in order. The last one may still be buffered too (lent,
      # not yet out of the buffer). What is done above a returned message is
      # forgotten: the returned one now holds its partition back from the
      # buffer, where #storable! does not look, and a later offset stores it.
      def return_lent
        return if @lent.empty?

        floors = lowest(@lent)
        forget_done { |message| (floor = floors[partition_of(message)]) && message.offset > floor }
        lent = @lent.slice!(0..)
        lent.pop if @at < @items.size && lent.last.equal?(@items[@at])
        @items = lent.concat(@items.drop(@at))
        @at = 0
      end

      # Drops what is buffered for these partitions.
      # @param partitions [Array<Array(String, Integer)>]
      # @param lent [Boolean] what is lent, handed and done too (a revoke:
      #   those partitions are gone, their offsets are no longer ours to store)
      # @return [Hash{Array(String, Integer) => Integer}] each partition's first
      #   dropped offset (partitions with nothing dropped are left out)
      def drop(partitions, lent: false)
        gone = partitions.to_h { |topic, partition| [[topic, partition], true] }
        forget_partitions(gone) if lent
        return {} unless buffered?

        firsts = {}
        @items = @items[@at..].reject do |item|
          next false unless item.is_a?(Message) && gone[pair = partition_of(item)]

          firsts[pair] ||= item.offset
        end
        @at = 0
        firsts
      end

      # Each of these partitions' first buffered offset (partitions with
      # nothing buffered are left out): where a seek goes back to before #drop.
      # @param partitions [Array<Array(String, Integer)>]
      # @return [Hash{Array(String, Integer) => Integer}]
      def firsts(partitions)
        wanted = partitions.to_h { |topic, partition| [[topic, partition], true] }
        @items.drop(@at).each_with_object({}) do |item, firsts|
          next unless item.is_a?(Message) && wanted[pair = partition_of(item)]

          firsts[pair] ||= item.offset
        end
      end

      # Every partition a message is held of: buffered, lent, handed or done.
      # @return [Array<Array(String, Integer)>]
      def partitions
        held = {}
        [@items.drop(@at), @lent, @handed, @done].each do |messages|
          messages.each { |message| held[partition_of(message)] = true if message.is_a?(Message) }
        end
        held.keys
      end

      private

      def partition_of(message) = [message.topic, message.partition]

      # items without the messages an earlier member finished: those are done
      # (their offsets stored in turn), each skipped once.
      def skipping(items)
        items.reject do |item|
          next false unless item.is_a?(Message) && (skips = @skips[pair = partition_of(item)]) && skips.delete(item.offset)

          @skips.delete(pair) if skips.empty?
          @skipped = true
          @done << item
        end
      end

      # Each partition's offset stored from ready (the one after its highest): its highest found first,
      # then one [topic, partition] key a partition, not one a message.
      def note_stored(ready)
        offsets_by_topic(ready, highest: true).each do |topic, partitions|
          partitions.each do |partition, offset|
            pair = [topic, partition]
            @bases[pair] = offset + 1 if (@bases[pair] || -1) <= offset
          end
        end
      end

      # What holds a done offset back: lent and handed messages, and buffered
      # ones while a skipped message (done as drained) may be above them.
      def unfinished
        held = @handed.empty? ? @lent : @lent + @handed
        @skipped ? held + @items.drop(@at).grep(Message) : held
      end

      # Partitions revoked (or the assignment replaced): what is lent, handed
      # and done of them, and what was known of their offsets, is not ours any more.
      def forget_partitions(gone)
        forget_done { |message| gone[partition_of(message)] }
        @lent.reject! { |message| gone[partition_of(message)] } unless @lent.empty?
        @handed.reject! { |message| gone[partition_of(message)] } unless @handed.empty?
        @starts.reject! { |topic, partition| gone[[topic, partition]] } unless @starts.empty?
        gone.each_key do |pair|
          unstart(*pair)
          @bases.delete(pair)
          @skips.delete(pair)
          @learned.delete(pair)
        end
      end

      def unstart(topic, partition)
        return unless (partitions = @unstarted[topic])

        partitions.delete(partition)
        @unstarted.delete(topic) if partitions.empty?
      end

      # Each partition's lowest (or highest) offset among messages, by topic, then partition: { topic =>
      # { partition => offset } }. No Array built and hashed per message: #storable! runs about 10 times a
      # second over up to max_buffered lent messages, and stores as many.
      def offsets_by_topic(messages, highest: false)
        messages.each_with_object({}) do |message, found|
          partitions = (found[message.topic] ||= {})
          known = partitions[message.partition]
          partitions[message.partition] = message.offset if known.nil? || (highest ? message.offset > known : message.offset < known)
        end
      end

      # Each partition's lowest offset among messages.
      def lowest(messages)
        messages.each_with_object({}) do |message, floors|
          pair = partition_of(message)
          floor = floors[pair]
          floors[pair] = message.offset if floor.nil? || message.offset < floor
        end
      end

      def forget_done(&)
        @done = @done.reject(&) unless @done.empty?
      end
    end
  end
end
