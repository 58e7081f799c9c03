/*
 * Sluice::Native::Consumer — a high-level (consumer group) librdkafka handle:
 * creation, subscriptions, the answers to rebalances, and closing.
 *
 * Two queues: the main queue (errors, statistics, OAuth refresh, logs, offset
 * commit results) is drained like a producer's, by the poller; the consumer
 * queue (messages, rebalances, consumer errors) by the application's thread
 * or fiber (consume.c), which waits on its own wake-up pipe through Ruby's IO.
 *
 * Rebalances arrive as events on the consumer queue (no rebalance callback:
 * no librdkafka -> Ruby call). Ruby handles each in its own frame and answers
 * it with #assign or #unassign here.
 */
#include "consumer.h"

#include "client.h"
#include "gate.h"
#include "init.h"
#include "partition_list.h"
#include "partition_queues.h"
#include "relay.h"
#include "values.h"

#include <poll.h>
#include <string.h>
#include <unistd.h>

static ID id_sluice_caller;

/*
 * Once close began, only its own thread may use the consumer: serving the
 * rebalance that gives the partitions up, committing before that. A helper
 * thread of Sluice::Shared::Blocking (a call under a fiber scheduler) counts as the
 * thread it works for (its :sluice_caller).
 */
static int closer_p(client_t *c) {
    consumer_t *con = sluice_consumer_of(c);
    VALUE thread = rb_thread_current();
    return thread == con->closer || rb_thread_local_aref(thread, id_sluice_caller) == con->closer;
}

/* The consumer's refusal (client_kind_t): once its close began, every other thread's call. */
static const char *closing_refusal(client_t *c) {
    consumer_t *con = sluice_consumer_of(c);
    return con->closing && !closer_p(c) ? "consumer is closing" : NULL;
}

/*
 * Group calls (subscribe, assign, assignment...) hand an op to librdkafka's
 * main thread and wait for its answer: usually at once, but as long as that
 * thread is busy. They run without the GVL, through the client's gate.
 */
enum group_call { ASSIGN, INCREMENTAL_ASSIGN, INCREMENTAL_UNASSIGN, SUBSCRIBE, UNSUBSCRIBE, ASSIGNMENT };

struct group_args {
    client_t *c;
    enum group_call call;
    rd_kafka_topic_partition_list_t *list; /* in, or out for ASSIGNMENT */
    rd_kafka_resp_err_t err;
    rd_kafka_error_t *error;
};

static void *group_nogvl(void *p) {
    struct group_args *a = p;
    rd_kafka_t *rk = a->c->rk;
    consumer_t *con = sluice_consumer_of(a->c);
    struct partition_queues *pq = con->partition_queues;
    /* an answer to a rebalance, given: nothing left for destroy to answer (consumer.c's release) */
    if (a->call == ASSIGN || a->call == INCREMENTAL_ASSIGN || a->call == INCREMENTAL_UNASSIGN) con->rebalance_due = 0;
    /* A partition's own queue before it is fetched (partition_queues.c); handed back to the consumer queue
     * once it is no longer (or could not be) assigned. An eager assignment replaces the whole one. */
    if (a->call == ASSIGN) sluice_partition_queues_remove(pq, NULL, con->queue);
    if ((a->call == ASSIGN || a->call == INCREMENTAL_ASSIGN) && __atomic_load_n(&con->own_queues, __ATOMIC_SEQ_CST))
        sluice_partition_queues_add(pq, rk, a->list, con->wake_w);
    switch (a->call) {
    case ASSIGN: a->err = rd_kafka_assign(rk, a->list); break;
    case INCREMENTAL_ASSIGN: a->error = rd_kafka_incremental_assign(rk, a->list); break;
    case INCREMENTAL_UNASSIGN: a->error = rd_kafka_incremental_unassign(rk, a->list); break;
    case SUBSCRIBE: a->err = rd_kafka_subscribe(rk, a->list); break;
    case UNSUBSCRIBE: a->err = rd_kafka_unsubscribe(rk); break;
    case ASSIGNMENT: a->err = rd_kafka_assignment(rk, &a->list); break;
    }
    if (a->call == INCREMENTAL_UNASSIGN || ((a->call == ASSIGN || a->call == INCREMENTAL_ASSIGN) && (a->err || a->error)))
        sluice_partition_queues_remove(pq, a->list, con->queue);
    return NULL;
}

static void release_group_list(void *p) {
    struct group_args *a = p;
    if (a->list) rd_kafka_topic_partition_list_destroy(a->list);
    a->list = NULL;
}

/* Runs the call; the list it was given is destroyed. Returns what Ruby gets:
 * nil or an error ([code, ...] tuple, or the code alone with code_only). */
static VALUE group_call(client_t *c, enum group_call call, rd_kafka_topic_partition_list_t *list, int code_only) {
    struct group_args a = {c, call, list, 0, NULL};
    sluice_gate_enter(c, group_nogvl, &a, NULL, NULL, release_group_list);
    release_group_list(&a);
    VALUE out = a.error ? sluice_error_tuple(a.error)
                : !a.err ? Qnil
                : code_only ? INT2FIX(a.err)
                            : rb_ary_new_from_args(1, INT2FIX(a.err));
    sluice_gate_leave(c);
    return out;
}

/*
 * Consumer.new([[name, value], ...]) — librdkafka consumer properties.
 * Raises ConfigurationInvalidError with librdkafka's message, and for a
 * producer property (which librdkafka would silently ignore).
 */
static VALUE consumer_initialize(VALUE self, VALUE pairs) {
    client_t *c = sluice_client_get(self);
    consumer_t *con = sluice_consumer_of(c);
    int fds[2];
    rd_kafka_conf_t *conf = sluice_conf_new(pairs, NULL, c);
    con->relay = sluice_relay_attach(conf); /* owned by the struct from here: freed whatever happens next */
    if (!con->relay) {
        rd_kafka_conf_destroy(conf);
        rb_raise(rb_eNoMemError, "cannot allocate the consumer's relay");
    }
    /* Refresh requests on a queue of their own (or the background thread
     * would run them as callbacks, and no event would reach the poller). */
    rd_kafka_conf_enable_sasl_queue(conf, 1);
    sluice_client_start(self, c, RD_KAFKA_CONSUMER, conf,
                        /* LOG too: the background thread relays only the kinds enabled here */
                        RD_KAFKA_EVENT_REBALANCE | RD_KAFKA_EVENT_OFFSET_COMMIT | RD_KAFKA_EVENT_ERROR |
                            RD_KAFKA_EVENT_STATS | RD_KAFKA_EVENT_OAUTHBEARER_TOKEN_REFRESH | RD_KAFKA_EVENT_LOG,
                        1);
    con->queue = rd_kafka_queue_get_consumer(c->rk);
#ifdef SLUICE_OWN_PARTITION_QUEUES
    con->partition_queues = sluice_partition_queues_new(); /* NULL (no memory) raises below */
#endif
    RB_OBJ_WRITE(self, &con->topic_names, rb_ary_new());
    /* From now on the struct owns the handle: a raise leaves it to #destroy or GC. */
    if (sluice_pipe(fds) < 0) rb_sys_fail("pipe");
    con->wake_r = fds[0];
    con->wake_w = fds[1];
    rd_kafka_queue_io_event_enable(con->queue, con->wake_w, "1", 1);
#ifdef SLUICE_OWN_PARTITION_QUEUES
    if (!con->partition_queues) rb_raise(rb_eNoMemError, "cannot allocate the consumer's partition queues");
#endif
    if (sluice_pipe(fds) < 0) rb_sys_fail("pipe");
    c->wake_r = fds[0];
    c->wake_w = fds[1];
    sluice_relay_set_pipe(con->relay, c->wake_w);
    sluice_relay_start(con->relay, c->rk, c->queue);
    con->sasl_queue = rd_kafka_queue_get_sasl(c->rk);
    if (con->sasl_queue) {
        rd_kafka_queue_io_event_enable(con->sasl_queue, c->wake_w, "1", 1);
        /* the first refresh request was queued inside rd_kafka_new, before this pipe */
        if (rd_kafka_queue_length(con->sasl_queue) > 0 && write(c->wake_w, "1", 1) < 0) {
            /* EAGAIN: a wake-up is pending already */
        }
    }
    return self;
}

/* #subscribe([topic, ...]) -> nil or error code */
static VALUE consumer_subscribe(VALUE self, VALUE topics) {
    client_t *c = sluice_consumer_open(self);
    Check_Type(topics, T_ARRAY);
    for (long i = 0; i < RARRAY_LEN(topics); i++) sluice_cstr_at(topics, i);
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new((int)RARRAY_LEN(topics));
    for (long i = 0; i < RARRAY_LEN(topics); i++)
        rd_kafka_topic_partition_list_add(list, sluice_cstr_at(topics, i), RD_KAFKA_PARTITION_UA);
    return group_call(c, SUBSCRIBE, list, 1);
}

static VALUE consumer_unsubscribe(VALUE self) { return group_call(sluice_consumer_open(self), UNSUBSCRIBE, NULL, 1); }

/* #assignment -> [[topic, partition, offset, err], ...] */
static VALUE consumer_assignment(VALUE self) {
    client_t *c = sluice_consumer_open(self);
    struct group_args a = {c, ASSIGNMENT, NULL, 0, NULL};
    sluice_gate_enter(c, group_nogvl, &a, NULL, NULL, NULL); /* the list comes out of the call */
    VALUE out = a.list && !a.err ? sluice_partitions_to_ary(a.list) : rb_ary_new();
    release_group_list(&a);
    sluice_gate_leave(c);
    return out;
}

static VALUE consumer_assignment_lost_p(VALUE self) {
    return rd_kafka_assignment_lost(sluice_consumer_open(self)->rk) ? Qtrue : Qfalse;
}

/*
 * #assign(partitions or nil, incremental) -> nil or [code, message, ...]
 * The answer to a rebalance that assigned partitions (incremental for the
 * cooperative protocol), or a manual assignment (with offsets). nil with
 * incremental false drops the whole assignment.
 */
static VALUE consumer_assign(VALUE self, VALUE partitions, VALUE incremental) {
    client_t *c = sluice_consumer_open(self);
    rd_kafka_topic_partition_list_t *list = NIL_P(partitions) ? NULL : sluice_partitions_from(partitions);
    return group_call(c, RTEST(incremental) ? INCREMENTAL_ASSIGN : ASSIGN, list, 0);
}

/* #unassign(partitions, incremental) — revokes (incremental: only those partitions). */
static VALUE consumer_unassign(VALUE self, VALUE partitions, VALUE incremental) {
    client_t *c = sluice_consumer_open(self);
    if (!RTEST(incremental)) return group_call(c, ASSIGN, NULL, 0);
    return group_call(c, INCREMENTAL_UNASSIGN, sluice_partitions_from(partitions), 0);
}

struct quiet_args {
    client_t *c;
    int timeout_ms;
};

static void *wait_quiet_nogvl(void *p) {
    struct quiet_args *a = p;
    for (int waited = 0; __atomic_load_n(&a->c->calls, __ATOMIC_SEQ_CST) > 0 && waited < a->timeout_ms; waited++) usleep(1000);
    return NULL;
}

/*
 * #close_start(timeout_ms) -> true when no call of another thread is inside
 * librdkafka any more. From now on the calling thread is the only one the
 * consumer serves: every other call raises ConsumerClosedError (a group call
 * racing the group's teardown waits forever, or fails librdkafka's
 * assertions). Calls already running are waited for, up to timeout_ms; each
 * has a bound of its own.
 */
static VALUE consumer_close_start(VALUE self, VALUE timeout) {
    client_t *c = sluice_consumer_open(self);
    consumer_t *con = sluice_consumer_of(c);
    struct quiet_args a = {c, NUM2INT(timeout)};
    RB_OBJ_WRITE(self, &con->closer, rb_thread_current());
    __atomic_store_n(&con->closing, 1, __ATOMIC_SEQ_CST); /* a commit of another thread waits on it (consume.c) */
    /* no unblock function: the wait is short and bounded, and ends by itself */
    rb_thread_call_without_gvl(wait_quiet_nogvl, &a, NULL, NULL);
    return __atomic_load_n(&c->calls, __ATOMIC_SEQ_CST) == 0 ? Qtrue : Qfalse;
}

/*
 * #close_begin -> nil or [code, message, ...]
 * Starts leaving the group without blocking (rd_kafka_consumer_close_queue):
 * the rebalance that gives the partitions up arrives on the consumer queue,
 * which the caller serves until #consumer_closed? is true.
 */
static VALUE consumer_close_begin(VALUE self) {
    client_t *c = sluice_consumer_open(self);
    consumer_t *con = sluice_consumer_of(c);
    return sluice_error_tuple(rd_kafka_consumer_close_queue(c->rk, con->queue));
}

static VALUE consumer_consumer_closed_p(VALUE self) {
    return rd_kafka_consumer_closed(sluice_consumer_open(self)->rk) ? Qtrue : Qfalse;
}

/* ---- the last #consume's events (consume.c takes them; consumer_t.taken) ---- */

/* The last #consume's events, destroyed (C only: any thread, with or without the GVL). */
void sluice_consumer_destroy_taken(client_t *c) {
    consumer_t *con = sluice_consumer_of(c);
    for (long i = 0; i < con->taken_count; i++) rd_kafka_event_destroy(con->taken[i]);
    con->taken_count = 0;
}

static void free_taken(client_t *c) {
    consumer_t *con = sluice_consumer_of(c);
    free(con->taken);
    free(con->taken_messages);
    con->taken = NULL;
    con->taken_messages = NULL;
    con->taken_count = con->taken_capa = 0;
    if (con->stored) rd_kafka_topic_partition_list_destroy(con->stored);
    con->stored = NULL;
}

static void release_taken(client_t *c) {
    sluice_consumer_destroy_taken(c);
    free_taken(c);
}

/* What a consumer holds besides the handle, released (release_native, no GVL). */
static void consumer_release(client_t *c) {
    consumer_t *con = sluice_consumer_of(c);
    if (con->sasl_queue) {
        rd_kafka_queue_io_event_enable(con->sasl_queue, -1, NULL, 0);
        rd_kafka_queue_destroy(con->sasl_queue);
        con->sasl_queue = NULL;
    }
    rd_kafka_queue_io_event_enable(con->queue, -1, NULL, 0);
    /* the partitions' queues first: what they hold goes to the consumer queue, emptied below */
    if (con->partition_queues) sluice_partition_queues_remove(con->partition_queues, NULL, con->queue);
    sluice_partition_queues_free(con->partition_queues);
    con->partition_queues = NULL;
    release_taken(c); /* the last #consume's events hold their partitions too */
    /* Messages fetched and never consumed hold their partitions, which hold
     * their brokers: left in the queue, rd_kafka_destroy would wait forever
     * for those broker threads. (librdkafka's own close serves a temporary
     * queue it then destroys; ours is the consumer queue itself.) */
    for (rd_kafka_event_t *ev; (ev = rd_kafka_queue_poll(con->queue, 0));) {
        if (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_REBALANCE) con->rebalance_due = 1;
        rd_kafka_event_destroy(ev);
    }
    /* A rebalance never answered (dropped just now, or handed to Ruby whose
     * answer raised, or the process is going down) would keep librdkafka
     * waiting for the answer forever inside rd_kafka_destroy: give the
     * partitions up. */
    if (con->rebalance_due) {
        rd_kafka_topic_partition_list_t *assigned = NULL;
        const char *protocol = rd_kafka_rebalance_protocol(c->rk);
        if (protocol && !strcmp(protocol, "COOPERATIVE") && !rd_kafka_assignment(c->rk, &assigned) && assigned) {
            rd_kafka_error_t *error = rd_kafka_incremental_unassign(c->rk, assigned);
            if (error) rd_kafka_error_destroy(error);
        } else {
            rd_kafka_assign(c->rk, NULL);
        }
        if (assigned) rd_kafka_topic_partition_list_destroy(assigned);
        con->rebalance_due = 0;
    }
    rd_kafka_queue_destroy(con->queue);
    con->queue = NULL;
}

/* ---- the consumer's steps of the base's release (client_kind_t, client.h) ---- */

static void release_start(client_t *c) {
    consumer_t *con = sluice_consumer_of(c);
    if (con->relay) sluice_relay_close(con->relay);
}

static void release_queues(client_t *c) {
    consumer_t *con = sluice_consumer_of(c);
    if (con->queue) consumer_release(c);
    /* Back from the background queue, whose thread rd_kafka_destroy stops
     * first: events relayed later would wait there, holding what they refer
     * to (brokers among them), and rd_kafka_destroy would wait for those. */
    if (con->relay) rd_kafka_queue_forward(c->queue, NULL);
}

/* A consumer whose close began has left the group as far as its deadline
 * allowed (Consumer::Lifecycle): librdkafka's own close here would wait,
 * unbounded, for what that close gave up on (a commit to a coordinator that
 * is down, a rebalance). */
static int destroy_flags(const client_t *c) { return ((const consumer_t *)c)->closing ? RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE : 0; }

static void release_end(client_t *c) {
    consumer_t *con = sluice_consumer_of(c);
    if (con->relay) sluice_relay_free(con->relay);
    con->relay = NULL;
}

static void free_unstarted(client_t *c) {
    release_end(c);         /* creating the handle failed after the relay was made */
    free_taken(c);          /* (destroyed: released already, a no-op) */
}

/* the parent's events and partition queues: only our copies of the lists */
static void free_forked(client_t *c) {
    consumer_t *con = sluice_consumer_of(c);
    free_taken(c);
    sluice_partition_queues_free(con->partition_queues);
    con->partition_queues = NULL;
}

/* ---- the consumer's main-queue events: its relay and SASL queue (client_source_t, client.h) ---- */

/* Pending OAUTHBEARER refresh requests (their number is asked first: polling
 * a consumer's queue counts as the application polling). */
static size_t sasl_left(consumer_t *con) { return con->sasl_queue ? rd_kafka_queue_length(con->sasl_queue) : 0; }

static size_t source_left(client_t *c) {
    consumer_t *con = sluice_consumer_of(c);
    return con->relay ? sluice_relay_length(con->relay) + sasl_left(con) : 0;
}

/* A refresh request first: a token about to expire outranks statistics and logs. */
static int source_take(client_t *c, event_item_t *out) {
    consumer_t *con = sluice_consumer_of(c);
    *out = (event_item_t){0};
    if (sasl_left(con) > 0 && (out->event = rd_kafka_queue_poll(con->sasl_queue, 0))) return 1;
    return con->relay && sluice_relay_pop(con->relay, out);
}

/* Waits for the relay's (and the SASL queue's) wake-up: never a poll of the handle. */
static void source_wait(client_t *c, int timeout_ms) {
    struct pollfd pfd = {.fd = c->wake_r, .events = POLLIN};
    if (source_left(c) == 0) poll(&pfd, 1, timeout_ms);
}

static void source_interrupt(client_t *c) {
    if (write(c->wake_w, "1", 1) < 0) {
        /* EAGAIN: a wake-up is pending already */
    }
}

/* Logs go through the relay's log callback: the CONFWARN lines of rd_kafka_new are there. */
static size_t source_find_logs(client_t *c, const char *fac, const char *needle, char *buf, size_t size) {
    consumer_t *con = sluice_consumer_of(c);
    return con->relay ? sluice_relay_find_logs(con->relay, fac, needle, buf, size) : 0;
}

static const client_source_t consumer_source = {
    .left = source_left,
    .take = source_take,
    .wait = source_wait,
    .interrupt = source_interrupt,
    .find_logs = source_find_logs,
};

/* ---- the consumer's struct, for the base (client_kind_t, client.h) ---- */

static void consumer_init(client_t *c) {
    consumer_t *con = sluice_consumer_of(c);
    con->wake_r = con->wake_w = -1;
    con->topic_names = con->closer = con->render_ops = con->render_null = Qnil;
}

static void consumer_mark(client_t *c) {
    consumer_t *con = sluice_consumer_of(c);
    rb_gc_mark_movable(con->topic_names);
    rb_gc_mark_movable(con->closer);
    rb_gc_mark_movable(con->render_ops);
    rb_gc_mark_movable(con->render_null);
}

static void consumer_compact(client_t *c) {
    consumer_t *con = sluice_consumer_of(c);
    con->topic_names = rb_gc_location(con->topic_names);
    con->closer = rb_gc_location(con->closer);
    con->render_ops = rb_gc_location(con->render_ops);
    con->render_null = rb_gc_location(con->render_null);
}

static size_t consumer_memsize(const client_t *c) {
    return (size_t)((const consumer_t *)c)->taken_capa * (sizeof(rd_kafka_event_t *) + sizeof(rd_kafka_message_t *));
}

/* The relay, the queues, the last #consume's events, the stored offsets and the queue's pipe went to the teardown's copy. */
static void consumer_disown(client_t *c) {
    consumer_t *con = sluice_consumer_of(c);
    con->relay = NULL;
    con->queue = con->sasl_queue = NULL;
    con->partition_queues = NULL;
    con->stored = NULL;
    con->taken = NULL;
    con->taken_messages = NULL;
    con->taken_count = con->taken_capa = 0;
    con->wake_r = con->wake_w = -1;
}

static void consumer_close_fds(client_t *c) {
    consumer_t *con = sluice_consumer_of(c);
    if (con->wake_r >= 0) close(con->wake_r);
    if (con->wake_w >= 0) close(con->wake_w);
    con->wake_r = con->wake_w = -1;
}

static const client_kind_t consumer_kind = {
    .name = "consumer",
    .size = sizeof(consumer_t),
    .init = consumer_init,
    .mark = consumer_mark,
    .compact = consumer_compact,
    .memsize = consumer_memsize,
    .disown = consumer_disown,
    .close_fds = consumer_close_fds,
    .source = &consumer_source,
    .closed_error = &sluice_eConsumerClosed,
    .refusal = closing_refusal,
    .release_start = release_start,
    .release_queues = release_queues,
    .destroy_flags = destroy_flags,
    .release_end = release_end,
    .free_unstarted = free_unstarted,
    .free_forked = free_forked,
};

struct own_queues_args {
    client_t *c;
    int on;
};

static void *own_queues_nogvl(void *p) {
    struct own_queues_args *a = p;
    consumer_t *con = sluice_consumer_of(a->c);
    /* on before the assignment is read: a rebalance answered meanwhile adds its partitions itself */
    __atomic_store_n(&con->own_queues, a->on, __ATOMIC_SEQ_CST);
    if (!a->on) {
        sluice_partition_queues_remove(con->partition_queues, NULL, con->queue);
        return NULL;
    }
    rd_kafka_topic_partition_list_t *assigned = NULL;
    if (!rd_kafka_assignment(a->c->rk, &assigned) && assigned) sluice_partition_queues_add(con->partition_queues, a->c->rk, assigned, con->wake_w);
    if (assigned) rd_kafka_topic_partition_list_destroy(assigned);
    return NULL;
}

/*
 * #own_partition_queues = on — whether each assigned partition is read from a queue of its own, taken in
 * turns by #consume (partition_queues.c), from now on and for the partitions assigned now; off hands
 * them back to the consumer queue. A concurrent read's (every partition starts within a turn), not a
 * plain read's: librdkafka's prefetch limits are then split among the partitions (patch 0015), which
 * halved each_batch's rate (1.16M -> 0.58M msg/s, 6 partitions). Order within a partition holds either
 * way: the consumer queue, holding the older messages, is taken first. A no-op without
 * SLUICE_OWN_PARTITION_QUEUES.
 */
static VALUE consumer_set_own_partition_queues(VALUE self, VALUE on) {
    client_t *c = sluice_consumer_open(self);
    struct own_queues_args a = {c, RTEST(on)};
    if (!sluice_consumer_of(c)->partition_queues) return on;
    sluice_gate_enter(c, own_queues_nogvl, &a, NULL, NULL, NULL);
    sluice_gate_leave(c);
    return on;
}

/* Consumer.own_partition_queues? -> whether each assigned partition is read from its own queue
 * (partition_queues.c; the bundled build, with its patch 0015) or all from the consumer queue. */
static VALUE consumer_s_own_partition_queues_p(VALUE klass) {
    (void)klass;
#ifdef SLUICE_OWN_PARTITION_QUEUES
    return Qtrue;
#else
    return Qfalse;
#endif
}

VALUE sluice_init_consumer(VALUE client) {
    VALUE klass = rb_define_class_under(sluice_mNative, "Consumer", client);
    rb_define_singleton_method(klass, "own_partition_queues?", consumer_s_own_partition_queues_p, 0);
    rb_define_method(klass, "initialize", consumer_initialize, 1);
    rb_define_method(klass, "subscribe", consumer_subscribe, 1);
    rb_define_method(klass, "unsubscribe", consumer_unsubscribe, 0);
    rb_define_method(klass, "assignment", consumer_assignment, 0);
    rb_define_method(klass, "assignment_lost?", consumer_assignment_lost_p, 0);
    rb_define_method(klass, "assign", consumer_assign, 2);
    rb_define_method(klass, "unassign", consumer_unassign, 2);
    rb_define_method(klass, "close_start", consumer_close_start, 1);
    rb_define_method(klass, "close_begin", consumer_close_begin, 0);
    rb_define_method(klass, "consumer_closed?", consumer_consumer_closed_p, 0);
    rb_define_method(klass, "own_partition_queues=", consumer_set_own_partition_queues, 1);
    id_sluice_caller = rb_intern("sluice_caller");
    sluice_client_kind(klass, &consumer_kind);
    return klass;
}
