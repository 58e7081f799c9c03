/*
 * Sluice::Native::Consumer — the consumer queue and offsets: draining
 * messages into Sluice::Message objects, storing and committing offsets,
 * pause/resume and seek.
 *
 * #consume never blocks: the application waits on #message_fd through Ruby's
 * IO (so a fiber scheduler sees the wait) and calls it when woken. Every poll
 * of the consumer queue counts as the application polling for
 * max.poll.interval.ms, so a waiting consumer stays in its group by calling
 * #consume now and then, while one stuck in a long block is not rescued by
 * anyone else's polling. It takes the events without the GVL and builds the
 * Ruby objects with it: with several consumers in one process, librdkafka's
 * share of each message (taking it off the queue, moving the position,
 * destroying it) runs beside the other readers instead of in turn with them
 * (six consumers, each_batch: 616-837k msg/s against 409-505k with the GVL
 * held throughout, one run each of two).
 */
#include "client.h"
#include "consumer.h"
#include "gate.h"
#include "init.h"
#include "partition_list.h"
#include "partition_queues.h"
#include "render.h"
#include "values.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

/*
 * Sluice::Message is a Struct defined here, its behaviour in
 * lib/sluice/message.rb: the extension fixes the field order it fills by
 * index. A Struct's fields are set by position, an object's instance
 * variables through a lookup in its class's table (Ruby 3.1): building
 * a message this way takes half the time (0.12 against 0.24 µs).
 */
static VALUE cMessage;
enum { MSG_TOPIC, MSG_PARTITION, MSG_OFFSET, MSG_KEY, MSG_PAYLOAD, MSG_TIMESTAMP, MSG_HEADERS };
static VALUE sym_rebalance, sym_assign, sym_revoke, sym_error, sym_eof;

/* The frozen String for a topic name, shared by all its messages: no allocation per message. */
static VALUE topic_name(client_t *c, const char *name) {
    consumer_t *con = sluice_consumer_of(c);
    long n = RARRAY_LEN(con->topic_names);
    for (long i = 0; i < n; i++) {
        VALUE s = RARRAY_AREF(con->topic_names, i);
        if (!strcmp(RSTRING_PTR(s), name)) return s;
    }
    VALUE s = rb_obj_freeze(rb_str_new_cstr(name));
    rb_ary_push(con->topic_names, s);
    return s;
}

static VALUE build_message(client_t *c, const rd_kafka_message_t *m) {
    VALUE msg = rb_struct_alloc_noinit(cMessage); /* every field nil */
    RSTRUCT_SET(msg, MSG_TOPIC, topic_name(c, rd_kafka_topic_name(m->rkt)));
    RSTRUCT_SET(msg, MSG_PARTITION, INT2FIX(m->partition));
    RSTRUCT_SET(msg, MSG_OFFSET, LL2NUM(m->offset));
    if (m->key) RSTRUCT_SET(msg, MSG_KEY, rb_str_new(m->key, (long)m->key_len));
    if (m->payload) RSTRUCT_SET(msg, MSG_PAYLOAD, rb_str_new(m->payload, (long)m->len));
    VALUE headers = sluice_headers_of(m); /* flat: Message#headers builds the Hash when asked */
    if (!NIL_P(headers)) RSTRUCT_SET(msg, MSG_HEADERS, headers);
    int64_t ts = rd_kafka_message_timestamp(m, NULL);
    if (ts >= 0) RSTRUCT_SET(msg, MSG_TIMESTAMP, LL2NUM(ts));
    return msg;
}

/*
 * One event of the consumer queue (and its message, for a fetch) into batch.
 */
static void take_event(client_t *c, rd_kafka_event_t *ev, const rd_kafka_message_t *m, VALUE batch) {
    switch (rd_kafka_event_type(ev)) {
    case RD_KAFKA_EVENT_FETCH:
        if (!m) return;
        if (!m->err) {
            rb_ary_push(batch, build_message(c, m));
        } else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            rb_ary_push(batch, rb_ary_new_from_args(4, sym_eof, m->rkt ? rb_str_new_cstr(rd_kafka_topic_name(m->rkt)) : Qnil,
                                                    INT2FIX(m->partition), LL2NUM(m->offset)));
        } else {
            rb_ary_push(batch, rb_ary_new_from_args(4, sym_error, INT2FIX(m->err), rb_str_new_cstr(rd_kafka_message_errstr(m)),
                                                    Qfalse));
        }
        return;
    case RD_KAFKA_EVENT_REBALANCE: {
        rd_kafka_resp_err_t err = rd_kafka_event_error(ev);
        VALUE kind = err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS   ? sym_assign
                     : err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS ? sym_revoke
                                                                   : sym_error;
        const char *protocol = rd_kafka_rebalance_protocol(c->rk);
        rb_ary_push(batch, rb_ary_new_from_args(5, sym_rebalance, kind,
                                                sluice_partitions_to_ary(rd_kafka_event_topic_partition_list(ev)),
                                                rb_str_new_cstr(protocol ? protocol : "NONE"), INT2FIX(err)));
        return;
    }
    case RD_KAFKA_EVENT_ERROR:
        if (rd_kafka_event_error(ev) == RD_KAFKA_RESP_ERR__PARTITION_EOF) { /* how 2.0.2 reports it */
            rd_kafka_topic_partition_t *tp = rd_kafka_event_topic_partition(ev);
            if (tp) {
                VALUE topic = rb_str_new_cstr(tp->topic);
                int32_t partition = tp->partition;
                int64_t offset = tp->offset;
                rd_kafka_topic_partition_destroy(tp); /* before anything else may raise */
                rb_ary_push(batch, rb_ary_new_from_args(4, sym_eof, topic, INT2FIX(partition), LL2NUM(offset)));
                return;
            }
        }
        rb_ary_push(batch, rb_ary_new_from_args(4, sym_error, INT2FIX(rd_kafka_event_error(ev)),
                                                sluice_str_or_nil(rd_kafka_event_error_string(ev)),
                                                rd_kafka_event_error_is_fatal(ev) ? Qtrue : Qfalse));
        return;
    default:
        return;
    }
}

/* Events taken between two looks at the clock (about 50 µs of work). */
#define BUDGET_CHECK_EVERY 64

struct take_args {
    client_t *c;
    long limit;
    double budget_ms;
    double deadline; /* from budget_ms, once the previous events are destroyed */
    int stop; /* a rebalance was taken, or the budget is spent */
};

/*
 * Up to max events of queue into the struct's taken arrays, each fetch's
 * message prepared (librdkafka's position moves past it). Returns how many,
 * or -1 once the take must end: after a rebalance (Ruby answers it before
 * anything fetched after it) or when the budget is spent.
 */
static long take_from(void *p, rd_kafka_queue_t *queue, long max) {
    struct take_args *a = p;
    client_t *c = a->c;
    consumer_t *con = sluice_consumer_of(c);
    long took = 0;
    while (took < max && con->taken_count < a->limit) {
        rd_kafka_event_t *ev = rd_kafka_queue_poll(queue, 0);
        if (!ev) break;
        int type = rd_kafka_event_type(ev);
        long n = con->taken_count;
        con->taken[n] = ev;
        const rd_kafka_message_t *m = type == RD_KAFKA_EVENT_FETCH ? rd_kafka_event_message_next(ev) : NULL;
        con->taken_messages[n] = m;
        if (m && !m->err) c->progress++;
        con->taken_count = ++n;
        took++;
        if (type == RD_KAFKA_EVENT_REBALANCE) con->rebalance_due = 1; /* answered by Ruby, or by release if that never happens */
        /* a clock read costs as much as a message */
        if (type == RD_KAFKA_EVENT_REBALANCE || (n % BUDGET_CHECK_EVERY == 0 && sluice_now_ms() >= a->deadline)) {
            a->stop = 1;
            return -1;
        }
    }
    return took;
}

/*
 * Without the GVL: destroys the previous #consume's events, empties the
 * wake-up pipe, and takes up to limit events: the consumer queue's first
 * (rebalances, errors, and what librdkafka forwarded there), then each
 * partition's queue in turn (partition_queues.c). What only librdkafka
 * touches is done here, while other threads build their messages; what
 * becomes Ruby objects is done with the GVL (#consume).
 */
static void *take_nogvl(void *p) {
    struct take_args *a = p;
    client_t *c = a->c;
    consumer_t *con = sluice_consumer_of(c);
    sluice_consumer_destroy_taken(c);
    char buf[64];
    while (read(con->wake_r, buf, sizeof(buf)) > 0) {
    }
    a->deadline = a->budget_ms < 0 ? INFINITY : sluice_now_ms() + a->budget_ms;
    take_from(a, con->queue, a->limit);
    if (!a->stop) sluice_partition_queues_take(con->partition_queues, a->limit - con->taken_count, take_from, a);
    con->exhausted = rd_kafka_queue_length(con->queue) > 0 || sluice_partition_queues_length(con->partition_queues) > 0;
    return NULL;
}

/* Room for limit events, allocated before the call (nothing may fail without the GVL). */
static void reserve_taken(client_t *c, long limit) {
    consumer_t *con = sluice_consumer_of(c);
    if (limit <= con->taken_capa) return;
    rd_kafka_event_t **events = realloc(con->taken, (size_t)limit * sizeof(*events));
    if (events) con->taken = events;
    const rd_kafka_message_t **messages = realloc(con->taken_messages, (size_t)limit * sizeof(*messages));
    if (messages) con->taken_messages = messages;
    if (!events || !messages) rb_raise(rb_eNoMemError, "no memory for %ld consumer events", limit);
    con->taken_capa = limit;
}

/*
 * #consume(max_items, budget_ms) -> Array
 *
 * Takes up to max_items from the consumer queue without blocking, for at
 * most budget_ms: without the GVL what only librdkafka touches (take_nogvl),
 * then with it the Ruby objects. Items are Sluice::Message objects and,
 * rarely, Arrays:
 *   [:rebalance, :assign | :revoke | :error, [[topic, partition, offset, err], ...], protocol, code]
 *     (the drain stops after it: it must be answered first)
 *   [:error, code, reason, fatal]     a consumer error (fetch failed, max.poll.interval.ms exceeded...)
 *   [:eof, topic, partition, offset]  with enable.partition.eof
 * #exhausted? tells whether events were left (the pipe is empty then: the
 * caller must not wait before consuming again). The events stay until the
 * next call (or close) destroys them, without the GVL too.
 */
struct build_args {
    client_t *c;
    VALUE batch;
    VALUE run; /* #render_batches: the Message whose payload the messages of one partition are rendered into */
    const rd_kafka_message_t *last; /* the run's last message */
};

/* Bytes that hold the output of the run starting at the index from (the messages of its partition taken
 * one after another): their keys and values, and what the ops print around them (numbers 20 digits at most).
 * Growing the run's String as it fills would copy it again and again (and fault in fresh pages each time). */
static long run_capacity(consumer_t *con, long from) {
    long per_message = 0;
    for (long i = 0; i < RARRAY_LEN(con->render_ops); i++) {
        VALUE op = RARRAY_AREF(con->render_ops, i);
        per_message += FIXNUM_P(op) ? 20 + RSTRING_LEN(con->render_null) : RSTRING_LEN(op);
    }
    const rd_kafka_message_t *first = con->taken_messages[from];
    long capacity = 0;
    for (long i = from; i < con->taken_count; i++) {
        const rd_kafka_message_t *m = con->taken_messages[i];
        if (!m || m->err || m->rkt != first->rkt || m->partition != first->partition) break;
        capacity += per_message + (long)m->len + (long)m->key_len;
    }
    return capacity;
}

/* A fetched message rendered into the run of its partition (a new run when the previous item was another's). */
static void render_message(struct build_args *b, const rd_kafka_message_t *m, long index) {
    client_t *c = b->c;
    consumer_t *con = sluice_consumer_of(c);
    if (NIL_P(b->run) || b->last->rkt != m->rkt || b->last->partition != m->partition) {
        b->run = rb_struct_alloc_noinit(cMessage);
        RSTRUCT_SET(b->run, MSG_TOPIC, topic_name(c, rd_kafka_topic_name(m->rkt)));
        RSTRUCT_SET(b->run, MSG_PARTITION, INT2FIX(m->partition));
        RSTRUCT_SET(b->run, MSG_PAYLOAD, rb_str_buf_new(run_capacity(con, index)));
        rb_ary_push(b->batch, b->run);
    }
    sluice_render(RSTRUCT_GET(b->run, MSG_PAYLOAD), con->render_ops, con->render_null, m, rd_kafka_topic_name(m->rkt));
    RSTRUCT_SET(b->run, MSG_OFFSET, LL2NUM(m->offset));
    b->last = m;
}

static VALUE build_batch(VALUE p) {
    struct build_args *b = (struct build_args *)p;
    client_t *c = b->c;
    consumer_t *con = sluice_consumer_of(c);
    for (long i = 0; i < con->taken_count; i++) {
        const rd_kafka_message_t *m = con->taken_messages[i];
        if (!NIL_P(con->render_ops) && m && !m->err) {
            render_message(b, m, i);
            continue;
        }
        b->run = Qnil; /* anything else ends a run: items keep their order */
        take_event(c, con->taken[i], m, b->batch);
    }
    return Qnil;
}

/*
 * #render_batches(ops, null) -> nil
 * From now on #consume hands over each run of fetched messages of one
 * partition as one Sluice::Message: its payload the messages rendered one
 * after another by ops (render.c; null: what a NULL key or value prints),
 * its offset the last one's (storing it stores past the run), no key,
 * headers or timestamp. What sluice tail reads with (no Message a message).
 */
static VALUE consumer_render_batches(VALUE self, VALUE ops, VALUE null) {
    client_t *c = sluice_consumer_open(self);
    consumer_t *con = sluice_consumer_of(c);
    StringValue(null);
    RB_OBJ_WRITE(self, &con->render_null, rb_str_new_frozen(null));
    RB_OBJ_WRITE(self, &con->render_ops, sluice_render_ops(ops));
    return Qnil;
}

static VALUE consumer_consume(VALUE self, VALUE max_items, VALUE budget) {
    client_t *c = sluice_consumer_open(self);
    long limit = NUM2LONG(max_items);
    struct take_args a = {c, limit, NUM2DBL(budget), 0, 0};
    if (limit < 1) rb_raise(rb_eArgError, "max_items must be positive, got %ld", limit);
    reserve_taken(c, limit);
    struct build_args b = {c, rb_ary_new(), Qnil, NULL};
    sluice_gate_enter(c, take_nogvl, &a, NULL, NULL, NULL);
    /* Still inside the gate while the events are read: #destroy (another
     * thread's close, without the GVL) waits for it before destroying them.
     * Whatever building raises (NoMemoryError) leaves the gate first. */
    int state = 0;
    rb_protect(build_batch, (VALUE)&b, &state);
    sluice_gate_leave_deferred(c);
    if (state) rb_jump_tag(state);
    return b.batch;
}

static VALUE consumer_consume_exhausted_p(VALUE self) { return sluice_consumer_of(sluice_client_get(self))->exhausted ? Qtrue : Qfalse; }

/* #message_fd -> the read end of the consumer queue's wake-up pipe (owned here: never close it) */
static VALUE consumer_message_fd(VALUE self) { return INT2FIX(sluice_consumer_of(sluice_consumer_open(self))->wake_r); }

/* #wake_messages — makes a wait on #message_fd return now. Safe from any thread and from a signal handler. */
static VALUE consumer_wake_messages(VALUE self) {
    client_t *c = sluice_client_get(self);
    consumer_t *con = sluice_consumer_of(c);
    if (con->wake_w >= 0 && write(con->wake_w, "1", 1) < 0) {
        /* EAGAIN: the pipe is full of wake-ups already */
    }
    return Qnil;
}

/*
 * #store_offsets(messages, count) — stores, for the first count items that
 * are Messages, the offset after the highest one of each partition: what a
 * commit will commit. Partitions no longer assigned are skipped (a revoked
 * partition's new owner starts from what was committed for it).
 * #store_offset(message) — the same for one message, without an Array
 * around it (Consumer#store_offset: one allocation less per message).
 */
/*
 * The offsets librdkafka stored (not those it refused: partitions not
 * assigned), noted per partition: a lost assignment cannot commit, and its
 * offsets are known only here (Consumer::LeftBehind). One lookup per
 * partition of a call, not per message.
 */
static void note_stored(client_t *c, const rd_kafka_topic_partition_list_t *list) {
    consumer_t *con = sluice_consumer_of(c);
    if (!con->stored) con->stored = rd_kafka_topic_partition_list_new(list->cnt);
    for (int i = 0; i < list->cnt; i++) {
        const rd_kafka_topic_partition_t *tp = &list->elems[i];
        if (tp->err || tp->offset < 0) continue;
        rd_kafka_topic_partition_t *noted = rd_kafka_topic_partition_list_find(con->stored, tp->topic, tp->partition);
        if (!noted) noted = rd_kafka_topic_partition_list_add(con->stored, tp->topic, tp->partition);
        noted->offset = tp->offset;
    }
}

static void store_offsets(client_t *c, const VALUE *messages, long n) {
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(n < 8 ? 1 : 8);
    rd_kafka_topic_partition_t *tp = NULL;
    VALUE tp_topic = Qnil, tp_partition = Qnil; /* tp's: messages come in runs of one partition */
    for (long i = 0; i < n; i++) { /* nothing in the loop runs Ruby code: messages stays where it is */
        VALUE m = messages[i];
        if (!rb_obj_is_kind_of(m, cMessage)) continue; /* control items */
        VALUE topic = RSTRUCT_GET(m, MSG_TOPIC), partition = RSTRUCT_GET(m, MSG_PARTITION), offset = RSTRUCT_GET(m, MSG_OFFSET);
        /* Nothing below may raise (the list would leak): anything but a fetched message's fields is skipped. */
        if (!RB_TYPE_P(topic, T_STRING) || !FIXNUM_P(partition) || !FIXNUM_P(offset)) continue;
        if (FIX2LONG(partition) < 0 || FIX2LONG(partition) > INT32_MAX) continue;
        if (topic != tp_topic || partition != tp_partition) {
            tp = rd_kafka_topic_partition_list_find(list, RSTRING_PTR(topic), (int32_t)FIX2LONG(partition));
            if (!tp) tp = rd_kafka_topic_partition_list_add(list, RSTRING_PTR(topic), (int32_t)FIX2LONG(partition));
            tp_topic = topic;
            tp_partition = partition;
        }
        int64_t next = (int64_t)FIX2LONG(offset) + 1;
        if (next > tp->offset) tp->offset = next;
    }
    if (list->cnt > 0 && !rd_kafka_offsets_store(c->rk, list)) note_stored(c, list); /* per-partition errors: not assigned any more */
    rd_kafka_topic_partition_list_destroy(list);
}

static VALUE consumer_store_offsets(VALUE self, VALUE messages, VALUE count) {
    client_t *c = sluice_consumer_open(self);
    Check_Type(messages, T_ARRAY);
    long n = NUM2LONG(count);
    if (n > RARRAY_LEN(messages)) n = RARRAY_LEN(messages);
    store_offsets(c, RARRAY_CONST_PTR(messages), n);
    return Qnil;
}

static VALUE consumer_store_offset(VALUE self, VALUE message) {
    store_offsets(sluice_consumer_open(self), &message, 1);
    return Qnil;
}

/*
 * #first_offsets(items) -> [[topic, partition, offset], ...]: the first
 * offset of each partition among the Messages of items, in the order first
 * seen (Consumer::Ledger#starts!). A drain's messages come in runs of one
 * partition: only a run's head is looked up, and no Ruby code runs per
 * message (a Ruby scan cost each_message 0.3 us a message).
 */
static VALUE consumer_first_offsets(VALUE self, VALUE items) {
    Check_Type(items, T_ARRAY);
    VALUE out = rb_ary_new();
    VALUE run_topic = Qnil, run_partition = Qnil;
    for (long i = 0; i < RARRAY_LEN(items); i++) {
        VALUE m = RARRAY_AREF(items, i);
        if (!rb_obj_is_kind_of(m, cMessage)) continue; /* control items */
        VALUE topic = RSTRUCT_GET(m, MSG_TOPIC), partition = RSTRUCT_GET(m, MSG_PARTITION);
        if (topic == run_topic && partition == run_partition) continue;
        run_topic = topic;
        run_partition = partition;
        int seen = 0;
        for (long j = 0; j < RARRAY_LEN(out) && !seen; j++) {
            VALUE first = RARRAY_AREF(out, j);
            seen = RARRAY_AREF(first, 1) == partition && rb_str_equal(RARRAY_AREF(first, 0), topic) == Qtrue;
        }
        if (!seen) rb_ary_push(out, rb_ary_new_from_args(3, topic, partition, RSTRUCT_GET(m, MSG_OFFSET)));
    }
    return out;
}

/*
 * #store_positions([[topic, partition, offset, metadata or nil], ...]) —
 * stores these offsets with their metadata (Consumer::FinishedOffsets: what
 * finished above the offset). Partitions no longer assigned are skipped.
 */
static VALUE consumer_store_positions(VALUE self, VALUE positions) {
    client_t *c = sluice_consumer_open(self);
    rd_kafka_topic_partition_list_t *list = sluice_partitions_from(positions);
    if (list->cnt > 0 && !rd_kafka_offsets_store(c->rk, list)) note_stored(c, list); /* per-partition errors: not assigned any more */
    rd_kafka_topic_partition_list_destroy(list);
    return Qnil;
}

/*
 * #take_stored([[topic, partition], ...]) -> [[topic, partition, offset], ...]:
 * the offset stored last for each of these partitions (those with one), then
 * forgotten (they are being revoked: the next assignment stores afresh).
 */
static VALUE consumer_take_stored(VALUE self, VALUE partitions) {
    consumer_t *con = sluice_consumer_of(sluice_consumer_open(self));
    Check_Type(partitions, T_ARRAY);
    VALUE out = rb_ary_new();
    for (long i = 0; con->stored && i < RARRAY_LEN(partitions); i++) {
        VALUE pair = rb_ary_entry(partitions, i);
        Check_Type(pair, T_ARRAY);
        VALUE topic = rb_ary_entry(pair, 0);
        const char *name = StringValueCStr(topic);
        int32_t partition = NUM2INT(rb_ary_entry(pair, 1));
        rd_kafka_topic_partition_t *noted = rd_kafka_topic_partition_list_find(con->stored, name, partition);
        if (!noted) continue;
        rb_ary_push(out, rb_ary_new_from_args(3, topic, INT2FIX(partition), LL2NUM(noted->offset)));
        rd_kafka_topic_partition_list_del(con->stored, name, partition);
    }
    return out;
}

struct commit_args {
    client_t *c;
    rd_kafka_topic_partition_list_t *list;
    int timeout_ms;
    rd_kafka_resp_err_t err;
    int want_result;                          /* keep the answer's offsets (a failed revoke's, to report) */
    rd_kafka_topic_partition_list_t *result;
    const int *closing;                       /* a close another thread may begin meanwhile, or NULL (the closer's own) */
};

#define COMMIT_SLICE_MS 100 /* how late a waiting commit sees a close of another thread begin */

/* The commit's answer within timeout_ms, or NULL. A close of another thread
 * that begins meanwhile ends the wait (within a slice): that close waits for
 * this call before it leaves the group, and would otherwise wait it out. */
static rd_kafka_event_t *await_commit(rd_kafka_queue_t *results, int timeout_ms, const int *closing) {
    if (!closing) return rd_kafka_queue_poll(results, timeout_ms);
    for (int left = timeout_ms;;) {
        int slice = left < COMMIT_SLICE_MS ? left : COMMIT_SLICE_MS;
        rd_kafka_event_t *ev = rd_kafka_queue_poll(results, slice);
        left -= slice;
        if (ev || left <= 0 || __atomic_load_n(closing, __ATOMIC_SEQ_CST)) return ev;
    }
}

/*
 * rd_kafka_commit's synchronous form has no timeout: with the coordinator
 * down it waits until the group gives the partitions up (session.timeout.ms,
 * 45 s by default). The result comes on a queue of our own instead, waited
 * for at most timeout_ms; a result arriving after that finds the queue
 * disabled and is dropped.
 */
static void *commit_nogvl(void *p) {
    struct commit_args *a = p;
    rd_kafka_queue_t *results = rd_kafka_queue_new(a->c->rk);
    a->err = rd_kafka_commit_queue(a->c->rk, a->list, results, NULL, NULL);
    if (!a->err) {
        rd_kafka_event_t *ev = await_commit(results, a->timeout_ms, a->closing);
        a->err = ev ? rd_kafka_event_error(ev) : RD_KAFKA_RESP_ERR__TIMED_OUT;
        const rd_kafka_topic_partition_list_t *answered = ev && a->want_result ? rd_kafka_event_topic_partition_list(ev) : NULL;
        if (answered) a->result = rd_kafka_topic_partition_list_copy(answered);
        if (ev) rd_kafka_event_destroy(ev);
    }
    rd_kafka_queue_destroy(results);
    return NULL;
}

/*
 * #commit(partitions or nil, async, timeout_ms = 10_000, with_offsets = false)
 *   -> nil or error code; with_offsets (synchronous only): nil or
 *   [error code, [[topic, partition, offset, err], ...] or nil (no answer in time)]
 * Commits the stored offsets (nil) or the given [[topic, partition, offset]].
 * Synchronous: blocks (GVL released) until the broker answered, at most
 * timeout_ms (then :timed_out; the commit may still happen). Async:
 * returns at once; the result arrives as an offset commit event on the main
 * queue, which the poller serves.
 */
static void release_commit_list(void *p) {
    struct commit_args *a = p;
    if (a->list) rd_kafka_topic_partition_list_destroy(a->list);
    a->list = NULL;
    if (a->result) rd_kafka_topic_partition_list_destroy(a->result);
    a->result = NULL;
}

static VALUE consumer_commit(int argc, VALUE *argv, VALUE self) {
    VALUE partitions, async, timeout, with_offsets;
    rb_scan_args(argc, argv, "22", &partitions, &async, &timeout, &with_offsets);
    int timeout_ms = NIL_P(timeout) ? 10000 : NUM2INT(timeout);
    client_t *c = sluice_consumer_open(self);
    consumer_t *con = sluice_consumer_of(c);
    /* Past the open check, a close already under way is this thread's own (consumer.c refuses the others'). */
    const int *closing = con->closing ? NULL : &con->closing;
    struct commit_args a = {c, NIL_P(partitions) ? NULL : sluice_partitions_from(partitions), timeout_ms, 0, RTEST(with_offsets), NULL,
                            closing};
    VALUE offsets = Qnil;
    if (RTEST(async)) {
        /* The result as an event on the main queue (relayed to the poller):
         * rd_kafka_commit(async) reports only to an offset_commit_cb. */
        a.err = rd_kafka_commit_queue(c->rk, a.list, c->queue, NULL, NULL);
    } else {
        sluice_gate_enter(c, commit_nogvl, &a, NULL, NULL, release_commit_list);
        if (a.result) offsets = sluice_partitions_to_ary(a.result);
        release_commit_list(&a);
        sluice_gate_leave(c);
    }
    release_commit_list(&a);
    if (!a.err || a.err == RD_KAFKA_RESP_ERR__NO_OFFSET) return Qnil;
    return a.want_result ? rb_ary_new_from_args(2, INT2FIX(a.err), offsets) : INT2FIX(a.err);
}

struct committed_args {
    client_t *c;
    rd_kafka_topic_partition_list_t *list;
    int timeout_ms;
    rd_kafka_resp_err_t err;
};

static void *committed_nogvl(void *p) {
    struct committed_args *a = p;
    a->err = rd_kafka_committed(a->c->rk, a->list, a->timeout_ms);
    return NULL;
}

static void release_committed_list(void *p) { rd_kafka_topic_partition_list_destroy(((struct committed_args *)p)->list); }

static VALUE fetch_committed(VALUE self, VALUE partitions, VALUE timeout, VALUE (*to_ary)(const rd_kafka_topic_partition_list_t *)) {
    client_t *c = sluice_consumer_open(self);
    int timeout_ms = NUM2INT(timeout);
    struct committed_args a = {c, sluice_partitions_from(partitions), timeout_ms, 0};
    sluice_gate_enter(c, committed_nogvl, &a, NULL, NULL, release_committed_list);
    VALUE out = rb_ary_new_from_args(2, INT2FIX(a.err), to_ary(a.list));
    release_committed_list(&a);
    sluice_gate_leave(c);
    return out;
}

/* #committed([[topic, partition], ...], timeout_ms) -> [error_code, [[topic, partition, offset, err], ...]] */
static VALUE consumer_committed(VALUE self, VALUE partitions, VALUE timeout) {
    return fetch_committed(self, partitions, timeout, sluice_partitions_to_ary);
}

/* #committed_metadata([[topic, partition], ...], timeout_ms) -> [error_code, [[topic, partition, offset, metadata or nil], ...]] */
static VALUE consumer_committed_metadata(VALUE self, VALUE partitions, VALUE timeout) {
    return fetch_committed(self, partitions, timeout, sluice_partitions_to_ary_with_metadata);
}

struct watermark_args {
    client_t *c;
    const char *topic;
    int32_t partition;
    int timeout_ms;
    int64_t low, high;
    rd_kafka_resp_err_t err;
};

static void *watermarks_nogvl(void *p) {
    struct watermark_args *a = p;
    a->err = rd_kafka_query_watermark_offsets(a->c->rk, a->topic, a->partition, &a->low, &a->high, a->timeout_ms);
    return NULL;
}

/* #watermarks(topic, partition, timeout_ms) -> [error_code, low, high] (asks the partition leader) */
static VALUE consumer_watermarks(VALUE self, VALUE topic, VALUE partition, VALUE timeout) {
    client_t *c = sluice_consumer_open(self);
    struct watermark_args a = {c, StringValueCStr(topic), NUM2INT(partition), NUM2INT(timeout), -1, -1, 0};
    sluice_gate_enter(c, watermarks_nogvl, &a, NULL, NULL, NULL);
    sluice_gate_leave(c);
    return rb_ary_new_from_args(3, INT2FIX(a.err), LL2NUM(a.low), LL2NUM(a.high));
}

/* #pause(partitions) / #resume(partitions) -> [[topic, partition, offset, err], ...] */
static VALUE pause_or_resume(VALUE self, VALUE partitions, int pause) {
    client_t *c = sluice_consumer_open(self);
    rd_kafka_topic_partition_list_t *list = sluice_partitions_from(partitions);
    if (pause) rd_kafka_pause_partitions(c->rk, list);
    else rd_kafka_resume_partitions(c->rk, list);
    VALUE out = sluice_partitions_to_ary(list);
    rd_kafka_topic_partition_list_destroy(list);
    return out;
}

static VALUE consumer_pause(VALUE self, VALUE partitions) { return pause_or_resume(self, partitions, 1); }
static VALUE consumer_resume(VALUE self, VALUE partitions) { return pause_or_resume(self, partitions, 0); }

struct seek_args {
    client_t *c;
    rd_kafka_topic_partition_list_t *list;
    int timeout_ms;
    rd_kafka_error_t *error;
};

static void *seek_nogvl(void *p) {
    struct seek_args *a = p;
    a->error = rd_kafka_seek_partitions(a->c->rk, a->list, a->timeout_ms);
    return NULL;
}

static void release_seek_list(void *p) { rd_kafka_topic_partition_list_destroy(((struct seek_args *)p)->list); }

/* #seek([[topic, partition, offset]], timeout_ms) -> [error tuple or nil, [[topic, partition, offset, err], ...]] */
static VALUE consumer_seek(VALUE self, VALUE partitions, VALUE timeout) {
    client_t *c = sluice_consumer_open(self);
    int timeout_ms = NUM2INT(timeout);
    struct seek_args a = {c, sluice_partitions_from(partitions), timeout_ms, NULL};
    sluice_gate_enter(c, seek_nogvl, &a, NULL, NULL, release_seek_list);
    VALUE out = rb_ary_new_from_args(2, sluice_error_tuple(a.error), sluice_partitions_to_ary(a.list));
    release_seek_list(&a);
    sluice_gate_leave(c);
    return out;
}

/*
 * Sluice::Native::Handoff#poll(timeout_ms, store: nil) -> Message or nil:
 * Consumer#poll (the Consumer includes this module). It is a C method for one
 * reason: the message must leave the consumer in its very last step. Ruby
 * checks for interrupts (Timeout, Thread#raise, kill) when a Ruby method
 * returns, and one landing after the message left the consumer's buffer,
 * before the caller had it, would skip it. So #lend_polled (Ruby: the
 * arguments, the checks, the read, the wait) lends the message, which stays
 * the Inbox's (lib/sluice/consumer/inbox.rb, "The hand-off invariant"), and
 * returns the lease, [lent, handed or nil]; here the message goes onto handed
 * (store: true: the next read finishes it), then off lent, and is returned,
 * with no Ruby method in between: a C method's return is no check. An
 * interrupt anywhere before leaves it lent: the next read hands it out again.
 */
static ID id_lend_polled, id_check_poll_timeout, id_store;
static VALUE sym_store;

/*
 * store: (nil when not given: #lend_polled applies the consumer's setting).
 * Read by hand when it is the only keyword: rb_scan_args copies the keyword
 * Hash, and rb_get_kwargs empties it, a cost on every message; anything else
 * goes to them for their ArgumentErrors.
 */
static VALUE poll_store_option(int argc, VALUE *argv) {
    if (argc == 1 && !rb_keyword_given_p()) return Qnil;
    if (argc == 2 && rb_keyword_given_p() && RHASH_SIZE(argv[1]) == 1) {
        VALUE store = rb_hash_lookup2(argv[1], sym_store, Qundef);
        if (store != Qundef) return store;
    }
    VALUE timeout_ms, options, store = Qundef;
    rb_scan_args(argc, argv, "1:", &timeout_ms, &options);
    if (!NIL_P(options)) rb_get_kwargs(options, &id_store, 0, 1, &store);
    return store == Qundef ? Qnil : store;
}

static VALUE handoff_poll(int argc, VALUE *argv, VALUE self) {
    VALUE store = poll_store_option(argc, argv);
    /* The usual timeout, a Fixnum >= 0, passes here; anything else is #check_poll_timeout's to accept or refuse. */
    if (!FIXNUM_P(argv[0]) || FIX2LONG(argv[0]) < 0) rb_funcall(self, id_check_poll_timeout, 1, argv[0]);
    VALUE lease = rb_funcall(self, id_lend_polled, 2, argv[0], store);
    if (!RB_TYPE_P(lease, T_ARRAY) || RARRAY_LEN(lease) != 2) return Qnil;
    VALUE lent = RARRAY_AREF(lease, 0), handed = RARRAY_AREF(lease, 1);
    if (!RB_TYPE_P(lent, T_ARRAY) || RARRAY_LEN(lent) == 0) return Qnil;
    VALUE message = RARRAY_AREF(lent, RARRAY_LEN(lent) - 1);
    if (RB_TYPE_P(handed, T_ARRAY)) rb_ary_push(handed, message); /* before it leaves lent: a raise here leaves it lent */
    rb_ary_pop(lent);
    return message;
}

/*
 * Sluice::Native::Handoff.lent_index(lent, message) -> Integer or nil: where
 * message itself (the same object, not an equal one) is in lent, from the
 * front: Consumer::Ledger#finish's search, when a message other than the last
 * lent finished (a concurrent read's blocks finish out of the order lent, and
 * up to max_buffered messages are lent). In Ruby it was a block call for each
 * lent message: 16% of the CPU of a read at concurrency 256 (issue 58, item 5).
 */
static VALUE handoff_lent_index(VALUE self, VALUE lent, VALUE message) {
    Check_Type(lent, T_ARRAY);
    for (long i = 0; i < RARRAY_LEN(lent); i++) {
        if (RARRAY_AREF(lent, i) == message) return LONG2NUM(i);
    }
    return Qnil;
}

void sluice_init_consume(VALUE klass) {
    id_lend_polled = rb_intern("lend_polled");
    id_check_poll_timeout = rb_intern("check_poll_timeout");
    id_store = rb_intern("store");
    sym_store = ID2SYM(id_store);
    VALUE handoff = rb_define_module_under(sluice_mNative, "Handoff");
    rb_define_method(handoff, "poll", handoff_poll, -1);
    rb_define_singleton_method(handoff, "lent_index", handoff_lent_index, 2);

    rb_define_method(klass, "consume", consumer_consume, 2);
    rb_define_method(klass, "render_batches", consumer_render_batches, 2);
    rb_define_method(klass, "consume_exhausted?", consumer_consume_exhausted_p, 0);
    rb_define_method(klass, "message_fd", consumer_message_fd, 0);
    rb_define_method(klass, "wake_messages", consumer_wake_messages, 0);
    rb_define_method(klass, "store_offsets", consumer_store_offsets, 2);
    rb_define_method(klass, "store_offset", consumer_store_offset, 1);
    rb_define_method(klass, "commit", consumer_commit, -1);
    rb_define_method(klass, "committed", consumer_committed, 2);
    rb_define_method(klass, "committed_metadata", consumer_committed_metadata, 2);
    rb_define_method(klass, "store_positions", consumer_store_positions, 1);
    rb_define_method(klass, "first_offsets", consumer_first_offsets, 1);
    rb_define_method(klass, "take_stored", consumer_take_stored, 1);
    rb_define_method(klass, "watermarks", consumer_watermarks, 3);
    rb_define_method(klass, "pause", consumer_pause, 1);
    rb_define_method(klass, "resume", consumer_resume, 1);
    rb_define_method(klass, "seek", consumer_seek, 2);

    /* Field order: the MSG_ indexes above. */
    cMessage = rb_struct_define_under(sluice_mSluice, "Message", "topic", "partition", "offset", "key", "payload", "timestamp_ms",
                                      "raw_headers", NULL);
    rb_gc_register_mark_object(cMessage);
    sym_rebalance = ID2SYM(rb_intern("rebalance"));
    sym_assign = ID2SYM(rb_intern("assign"));
    sym_revoke = ID2SYM(rb_intern("revoke"));
    sym_error = ID2SYM(rb_intern("error"));
    sym_eof = ID2SYM(rb_intern("eof"));
}
