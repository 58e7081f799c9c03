# frozen_string_literal: true

module Sluice
  # Instrumentation bus of a client (producer, consumer, admin; or a
  # ProducerPool's, for the pool's own events): subscribe to named events with a block
  # (`subscribe("message.acknowledged") { |event| ... }`) or with a listener
  # object (`on_message_acknowledged(event)`, ...). A listener that raises is
  # reported as `error.occurred` (type "callbacks.listener.error") and never
  # stops polling or the other listeners.
  class Monitor
    # Every event name a listener can subscribe to.
    EVENTS = %w[
      message.produced_async
      message.produced_sync
      messages.produced_async
      messages.produced_sync
      message.buffered
      messages.buffered
      buffer.flushed_async
      buffer.flushed_sync
      buffer.purged
      message.acknowledged
      message.purged
      error.occurred
      statistics.emitted
      oauthbearer.token_refresh
      transaction.started
      transaction.committed
      transaction.aborted
      transaction.finished
      producer.connected
      producer.closing
      producer.closed
      producer.reload
      producer.reloaded
      poller.budget_exceeded
      poller.producer_registered
      poller.producer_unregistered
      consumer.partitions_assigned
      consumer.partitions_revoked
      consumer.revoke_waiting
      consumer.offsets_committed
      consumer.offsets_left_behind
      consumer.offsets_recovered
      consumer.partition_eof
      consumer.retry
      consumer.dead_lettered
      consumer.retry_scheduled
      consumer.retry_waiting
      consumer.connected
      consumer.closing
      consumer.closed
      poller.consumer_registered
      share_consumer.acknowledgements_committed
      share_consumer.closing
      share_consumer.closed
      poller.consumer_unregistered
      admin.connected
      admin.request
      admin.closing
      admin.closed
      poller.admin_registered
      poller.admin_unregistered
      connection_pool.created
      connection_pool.setup
      connection_pool.reload
      connection_pool.reloaded
      connection_pool.shutdown
    ].freeze

    # What a listener receives: the event's name and its payload (a Hash).
    Event = Struct.new(:id, :payload) do
      # @param key [Symbol]
      # @return [Object, nil] the payload's value
      def [](key) = payload[key]
      # Hash#fetch on the payload.
      # @return [Object]
      # @raise [KeyError] a key the payload does not have (without a default)
      def fetch(...) = payload.fetch(...)
      # @return [Hash] the payload
      def to_h = payload

      # The payload with every secret FILTERED (Shared::Secrets.filter_payload): what a
      # listener logs or an error tracker records holds no password.
      # @return [String]
      def inspect = "#<struct #{self.class.name} id=#{id.inspect}, payload=#{Shared::Secrets.filter_payload(payload).inspect}>"
      alias_method :to_s, :inspect

      # pp shows #inspect (Struct's own walks the members as they are).
      def pretty_print(printer) = printer.text(inspect)
    end

    # No listeners (shared, frozen).
    # @api private
    NONE = [].freeze

    # @param logger [Logger] where an error.occurred listener's own failure is logged
    def initialize(logger: Logger.new($stderr, progname: "sluice"))
      @logger = logger
      @mutex = Mutex.new
      # Copy-on-write: the poller reads the listener lists without locking.
      @listeners = {}.freeze
      @deferred = {} # event name => waiters for its first listener (under @mutex)
    end

    # Adds a listener. It runs on the thread that fires the event: for
    # deliveries and errors the polling thread, which in :fd mode serves
    # every client meanwhile, so keep it short; for statistics the process's
    # statistics thread (Polling::StatisticsThread).
    # @overload subscribe(event_name, &block)
    #   @param event_name [String] one of EVENTS
    #   @yieldparam event [Event]
    #   @return [Proc] the block, to pass to #unsubscribe
    #   @raise [ArgumentError] an unknown event name
    # @overload subscribe(listener)
    #   Calls listener.on_<event_name_with_underscores>(event) for each event
    #   it has a method for.
    #   @param listener [Object] e.g. with #on_message_acknowledged(event)
    #   @return [Object] the listener, to pass to #unsubscribe
    #   @raise [ArgumentError] the listener has no on_<event> method
    # @example
    #   producer.monitor.subscribe("message.acknowledged") do |event|
    #     puts "delivered to #{event[:topic]}/#{event[:partition]} at #{event[:offset]}"
    #   end
    #   producer.monitor.subscribe(Sluice::Instrumentation::LoggerListener.new(Logger.new($stdout)))
    def subscribe(event_or_listener, &block)
      if block
        add(checked_name(event_or_listener), block)
        block
      else
        names = EVENTS.select { |name| event_or_listener.respond_to?(method_name(name)) }
        raise ArgumentError, "#{event_or_listener.inspect} has no on_<event> method (events: #{EVENTS.join(", ")})" if names.empty?

        names.each { |name| add(name, event_or_listener.method(method_name(name))) }
        event_or_listener
      end
    end

    # Removes a block or listener #subscribe returned, from every event.
    # @param block_or_listener [Proc, Object]
    # @return [void]
    def unsubscribe(block_or_listener)
      @mutex.synchronize do
        kept = @listeners.transform_values { |list| list.reject { |l| same_listener?(l, block_or_listener) }.freeze }
        @listeners = kept.reject { |_, list| list.empty? }.freeze
      end
    end

    # For a request that only a listener can answer (a token refresh fired
    # inside Producer.new, before the application could subscribe): when
    # nobody listens to `name` yet, waiter.subscribed(name) is called once the
    # first listener subscribes, on the subscriber's thread.
    # @return [Boolean] deferred (false: someone listens already, go on)
    # @api private
    # @param name [String] an event name
    # @param waiter [#subscribed]
    def defer_until_subscribed(name, waiter)
      @mutex.synchronize do
        return false if @listeners.key?(name)

        waiters = @deferred.fetch(name, NONE)
        @deferred[name] = waiters + [waiter] unless waiters.include?(waiter)
      end
      true
    end

    # A closed client waits for nothing any more.
    # @api private
    # @param waiter [#subscribed]
    # @return [void]
    def forget_deferred(waiter)
      @mutex.synchronize { @deferred.transform_values! { |waiters| waiters - [waiter] } }
    end

    # The listeners of `name`, in order (poller.budget_exceeded names them).
    # @api private
    # @param name [String] an event name
    # @return [Array<#call>]
    def listeners(name) = @listeners.fetch(name, NONE)

    # Cheap check so hot paths build payloads only for someone.
    # @param name [String] an event name
    # @return [Boolean]
    def listening?(name) = @listeners.key?(name)

    # Calls every listener of `name` with an Event; returns the payload.
    # With a block: runs it first, adds how long it took (payload[:time], ms)
    # and returns the block's value; the listeners run only when it returned.
    # @api private
    # @param name [String] an event name
    # @param payload [Hash]
    # @return [Hash, Object] the payload, or the block's value
    def instrument(name, payload, &block)
      listeners = @listeners.fetch(name, NONE)
      return timed(listeners, name, payload, &block) if block
      return payload if listeners.empty?

      publish(listeners, name, payload)
      payload
    end

    private

    def timed(listeners, name, payload)
      return yield if listeners.empty?

      started = Shared::Clock.now
      result = yield
      payload[:time] = (Shared::Clock.now - started) * 1000
      publish(listeners, name, payload)
      result
    end

    def publish(listeners, name, payload)
      event = Event.new(name, payload)
      listeners.each { |listener| notify(listener, event) }
    end

    # ScriptError too (NotImplementedError, a failed require): a listener bug of
    # any kind must not end the poller thread that called it. On a polling
    # thread nothing above us could handle anything else either (exit only
    # ends that thread there, NoMemoryError may pass): report it and go on.
    # Elsewhere such exceptions take their usual course.
    def notify(listener, event)
      if Polling.thread?
        Thread.handle_interrupt(Object => :immediate) { listener.call(event) } # a listener's own Timeout must work
      else
        listener.call(event)
      end
    rescue StandardError, ScriptError => e
      report_listener_error(e, event)
    rescue Exception => e # rubocop:disable Lint/RescueException
      raise unless Polling.thread?

      report_listener_error(e, event)
    end

    def report_listener_error(error, event)
      if event.id == "error.occurred"
        @logger.error("error.occurred listener raised #{error.class}: #{error.message}")
      else
        instrument("error.occurred", client_ids(event).merge!(type: "callbacks.listener.error", error: error, event_id: event.id))
      end
    end

    # The event's client: a consumer's or an admin's listener error names it
    # as such; producer_id (nil when no client is named) as WaterDrop's does.
    def client_ids(event)
      ids = event.payload.slice(:producer_id, :consumer_id, :admin_id)
      ids.empty? ? { producer_id: nil } : ids
    end

    def same_listener?(callable, block_or_listener)
      callable == block_or_listener || (callable.is_a?(Method) && callable.receiver.equal?(block_or_listener))
    end

    def add(name, callable)
      waiters = @mutex.synchronize do
        list = (@listeners.fetch(name, NONE) + [callable]).freeze
        @listeners = @listeners.merge(name => list).freeze
        @deferred.delete(name)
      end
      waiters&.each { |waiter| waiter.subscribed(name) }
    end

    def checked_name(name)
      name = name.to_s
      raise ArgumentError, "unknown event #{name.inspect} (events: #{EVENTS.join(", ")})" unless EVENTS.include?(name)

      name
    end

    def method_name(event_name) = :"on_#{event_name.tr(".", "_")}"
  end
end
