/*
 * The native client: one librdkafka handle, its main queue and wake-up pipe,
 * in the struct every client file shares, and what client.c provides them.
 *
 * Sluice::Native::Client is the base class (client.c: allocation,
 * configuration, destroy, fork; gate.c: the gate of GVL-released calls;
 * drain.c: the main queue); Producer, Consumer and Admin are its subclasses.
 * The base calls no kind's code by name: each kind registers a client_kind_t
 * (below) with its class, and the base calls through it. The kinds' tables:
 * producer_kind in produce.c, consumer_kind in consumer.c, admin_kind in
 * admin.c. ext/sluice/README.md says which file adds what.
 */
#ifndef SLUICE_CLIENT_H
#define SLUICE_CLIENT_H

#include "sluice.h"

typedef struct {
    char *name;
    size_t len;
    int conf_id; /* 0: the producer's own topic settings; n: topic_confs[n - 1] */
    rd_kafka_topic_t *rkt;
} topic_entry_t;

typedef int32_t (*partitioner_fn)(const rd_kafka_topic_t *, const void *, size_t, int32_t, void *, void *);

/* What only a producer uses (produce.c, transactions.c). */
typedef struct {
    partitioner_fn partitioner;
    VALUE inflight;            /* Array: slot -> DeliveryHandle (nil when free) */
    int32_t *free_slots;       /* stack of free slots; capacity >= inflight length */
    long free_count, free_capa;
    long inflight_count;
    VALUE handle_class;        /* what #produce returns (Sluice::DeliveryHandle) */
    VALUE notifier;            /* given to every handle: wakes its waiters */
    topic_entry_t *topics;     /* topic handles, so produce skips librdkafka's by-name lookup (grows: malloc'd) */
    int topic_count, topic_capa;
    rd_kafka_topic_conf_t **topic_confs; /* variants' topic settings (#add_topic_config), opaque = their id */
    int topic_conf_count, topic_conf_capa;
    unsigned long delivered;   /* messages delivered, ever: proof the brokers accept the client (#progress) */
} producer_part_t;

/* What only a consumer uses (consumer.c, consume.c; drain.c takes its main-queue events from the relay). */
typedef struct {
    struct relay *relay;       /* where the main queue's events come from (drain.c takes them there) */
    rd_kafka_queue_t *sasl_queue; /* OAUTHBEARER refresh requests (NULL without OAUTHBEARER): the background
                                     queue would run them as callbacks, so they get a queue of their own */
    rd_kafka_queue_t *queue;   /* the consumer queue: messages, rebalances, consumer errors */
    int wake_r, wake_w;        /* its wake-up pipe, waited on through Ruby's IO (fibers yield) */
    int exhausted;             /* the last #consume stopped with events left */
    rd_kafka_event_t **taken;  /* the last #consume's events, destroyed by the next one or by release (malloc'd) */
    const rd_kafka_message_t **taken_messages; /* each one's message (NULL: not a fetch) */
    long taken_count, taken_capa;
    int rebalance_due;         /* a rebalance went to Ruby and was not answered yet (#assign/#unassign) */
    VALUE topic_names;         /* frozen topic names, shared by every message of the topic */
    unsigned long fetched;     /* messages taken by #consume, ever: proof the brokers accept the client (#progress) */
    int closing;               /* close began: calls of other threads are refused (consumer.c) */
    VALUE closer;              /* the thread running that close (nil before) */
} consumer_part_t;

typedef struct client client_t;

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
    const VALUE *closed_error; /* what a call on a closed one raises (sluice.h's classes) */
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
} client_kind_t;

/* One librdkafka handle of any kind, and what its kind adds. */
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
    producer_part_t producer;
    consumer_part_t consumer;
};

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
