/*
 * The native client: one librdkafka handle, its main queue and wake-up pipe,
 * in the struct every kind's struct begins with, and what client.c provides.
 *
 * Sluice::Native::Client is the base class (client.c: allocation,
 * configuration, destroy, fork; gate.c: the gate of GVL-released calls;
 * drain.c: the main queue); Producer, Consumer and Admin are its subclasses.
 * The base calls no kind's code by name and knows none of its fields: each
 * kind's struct begins with client_t (producer_t in produce.h, consumer_t in
 * consumer.h; an admin client has no fields of its own), and each kind
 * registers a client_kind_t (below) with its class: its struct's size and GC
 * hooks, its steps of the release, where its events come from. The base
 * allocates, marks, copies and releases through it. The kinds' tables:
 * producer_kind in produce.c, consumer_kind in consumer.c, admin_kind in
 * admin.c. ext/sluice/README.md says which file adds what.
 */
#ifndef SLUICE_CLIENT_H
#define SLUICE_CLIENT_H

#include "common.h"

typedef struct client client_t;

/* An event a kind's own source hands the drain, or a log line (event NULL; fac and line malloc'd). */
typedef struct {
    rd_kafka_event_t *event;
    int level;
    char *fac, *line;
} event_item_t;

static inline void sluice_event_item_free(event_item_t *item) {
    if (item->event) rd_kafka_event_destroy(item->event);
    free(item->fac);
    free(item->line);
    *item = (event_item_t){0};
}

/*
 * Where a kind's main-queue events come from when not from the main queue
 * itself (a consumer's: its relay and SASL queue, consumer.c). drain.c serves
 * what `take` hands it; the wake-up pipe is then the source's to write, and
 * lives as long as the handle.
 */
typedef struct client_source {
    size_t (*left)(client_t *c);                     /* items waiting (with or without the GVL) */
    int (*take)(client_t *c, event_item_t *out);     /* the next one into *out (GVL held); 0 when none */
    void (*wait)(client_t *c, int timeout_ms);       /* without the GVL: until an item may be there, at most timeout_ms */
    void (*interrupt)(client_t *c);                  /* ends another thread's wait (any thread, no GVL needed) */
    /* The lines of the log records queued so far from facility fac that contain needle,
     * into buf ("; "-separated, truncated to size); how many matched. */
    size_t (*find_logs)(client_t *c, const char *fac, const char *needle, char *buf, size_t size);
} client_source_t;

/*
 * What the base (client.c, gate.c, drain.c) calls of a client's kind. Every hook may
 * be NULL (nothing to do). The release hooks run without the GVL, on the
 * struct or on a copy of it (a teardown in its own thread), in this order
 * around the base's own steps:
 *
 *   release_start    before the main queue's wake-up pipe is unhooked
 *   release_queues   then, before the main queue is destroyed
 *   destroy_flags    rd_kafka_destroy_flags's flags (0: rd_kafka_destroy)
 *   release_end      after the handle is destroyed, before the pipes close
 */
typedef struct client_kind {
    const char *name;          /* what errors call it: "producer", "consumer", "admin" */
    /* The kind's struct: it begins with client_t (a client_t * of the kind is a pointer to it), then the
     * kind's own fields, which `init` sets (VALUEs to nil, fds to -1) right after allocation. */
    size_t size;
    void (*init)(client_t *c);
    /* GC: the kind's VALUEs marked and moved; the memory it holds beyond size (memsize) */
    void (*mark)(client_t *c);
    void (*compact)(client_t *c);
    size_t (*memsize)(const client_t *c);
    /* GC, on every path: what the object's own memory holds (xmalloc'd), with the GVL */
    void (*free_memory)(client_t *c);
    /* A copy of the struct took the native resources over (a teardown in its own thread): the
     * original forgets the kind's, so that nothing is released twice. */
    void (*disown)(client_t *c);
    /* The kind's own fds, closed (idempotent): with the base's pipe, in every path that closes it */
    void (*close_fds)(client_t *c);
    const VALUE *closed_error; /* what a call on a closed one raises (common.h's classes) */
    /* Why a call of the calling thread is refused now (NULL: it is not), with the GVL;
     * never raises. Asked by the gate for calls without unblock function. */
    const char *(*refusal)(client_t *c);
    void (*release_start)(client_t *c);
    void (*release_queues)(client_t *c);
    int (*destroy_flags)(const client_t *c);
    void (*release_end)(client_t *c);
    /* GC, when the handle was never created (what initialize allocated before it failed) */
    void (*free_unstarted)(client_t *c);
    /* GC in a forked child: the parent's handle is never touched, only our memory freed (fds: the base) */
    void (*free_forked)(client_t *c);
    /*
     * What #drain (drain.c) asks of the kind, with the GVL, never raising:
     * delivery  a delivery report's message: its handle, taken out of the
     *           kind's in-flight table, a success recorded on it; nil when
     *           Ruby has nothing to see (no handle, or a success that could
     *           not be recorded: a frozen handle)
     * result    an event of the kind's own (an admin request's result): its
     *           data for Ruby, or Qundef when the event is not one
     */
    VALUE (*delivery)(client_t *c, const rd_kafka_message_t *msg);
    VALUE (*result)(rd_kafka_event_t *ev);
    const client_source_t *source; /* NULL: the main queue (client_source_t) */
} client_kind_t;

/* One librdkafka handle of any kind; its kind's struct begins with it. */
struct client {
    const client_kind_t *ops;  /* its kind's table (from its class, at allocation); NULL for a bare Client */
    rd_kafka_t *rk;
    rd_kafka_type_t kind;
    rd_kafka_queue_t *queue;   /* main queue: delivery reports, errors, stats, oauth, logs */
    rd_kafka_event_t *pending; /* taken by a blocking #wait_events, served by the next #drain */
    pid_t pid;
    int closed;                /* set with the GVL held before destroying: every call is refused */
    int busy;                  /* GVL-released calls in flight (atomic, gate.c); destroy waits for 0 */
    int calls;                 /* of those, the ones without unblock function still inside librdkafka (atomic):
                                  what a consumer's close waits for before it leaves the group */
    int wake_r, wake_w;        /* wake-up pipe for FD polling, -1 when disabled */
    int exhausted;             /* the last #drain stopped on its budget with events left */
    unsigned long progress;    /* messages delivered (a producer) or fetched (a consumer), ever: proof the
                                  brokers accept the client (#progress) */
    /* the kind's own fields follow (client_kind_t.size) */
};

/* Raises whatever interrupt (Thread#raise, Timeout, kill, signal) is pending: the gate's (gate.c), and
 * #destroy's, which does not pass the gate. */
static inline void sluice_raise_pending_interrupts(void) { rb_thread_check_ints(); }

/* Registers kind as the table of klass and its subclasses (each kind's init, once). */
void sluice_client_kind(VALUE klass, const client_kind_t *kind);

client_t *sluice_client_get(VALUE self);
/* The struct of a usable handle; raises for a closed one or one inherited through fork. */
client_t *sluice_client_open(VALUE self);
/* Raises its kind's closed error when its kind refuses the calling thread's call now (client_kind_t.refusal). */
void sluice_client_refuse(client_t *c);
/* Raises its kind's closed error ("consumer is closed"). */
NORETURN(void sluice_client_raise_closed(const client_t *c));

/*
 * A librdkafka configuration from [[name, value], ...] (Strings), log.queue on.
 * Raises ConfigurationInvalidError with librdkafka's message; nothing leaks.
 * `each` (optional) sees every pair that was accepted.
 */
rd_kafka_conf_t *sluice_conf_new(VALUE pairs, void (*each)(client_t *, const char *, const char *), client_t *c);
/*
 * Creates the handle (takes over conf) with the event API for `events`, and
 * its main queue. `strict`: a property of the other client kind (which
 * librdkafka would only log as ignored) raises ConfigurationInvalidError.
 */
void sluice_client_start(VALUE self, client_t *c, rd_kafka_type_t kind, rd_kafka_conf_t *conf, int events, int strict);

#endif
