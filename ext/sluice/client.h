/*
 * The native client: one librdkafka handle, its main queue and wake-up pipe.
 *
 * Sluice::Native::Client is the base class (lifecycle, main-queue drain,
 * OAuth, fatal errors, admin); Sluice::Native::Producer adds produce, flush,
 * purge and transactions. Each concept has its own file:
 *
 *   client.c        allocation, configuration, destroy, fork and busy tracking
 *   drain.c         the main queue: non-blocking drain, blocking wait, wake-up pipe
 *   produce.c       message validation, topic handles, in-flight table, produce/flush/purge
 *   transactions.c  the transactional API
 *   admin.c         Sluice::Native::Admin: admin requests and their results; partition counts
 *   consumer.c      Sluice::Native::Consumer: subscriptions, rebalances, closing
 *   consume.c       the consumer queue: messages, offsets, positions
 *   relay.c         a consumer's main-queue events, relayed so serving them is no "poll"
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

/* relay.c: a consumer's main-queue events, handed over by librdkafka's background thread. */
typedef struct relay relay_t;
/* An event, or a log line (event NULL; fac and line malloc'd). */
typedef struct {
    rd_kafka_event_t *event;
    int level;
    char *fac, *line;
} relay_item_t;

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
    relay_t *relay;            /* where the main queue's events come from (drain.c takes them there) */
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

/* One librdkafka handle of any kind, and what its kind adds. */
typedef struct {
    rd_kafka_t *rk;
    rd_kafka_type_t kind;
    rd_kafka_queue_t *queue;   /* main queue: delivery reports, errors, stats, oauth, logs */
    rd_kafka_event_t *pending; /* taken by a blocking #wait_events, served by the next #drain */
    pid_t pid;
    int closed;                /* set with the GVL held before destroying: every call is refused */
    int busy;                  /* GVL-released calls in flight (atomic); destroy waits for 0 */
    int calls;                 /* of those, the ones without unblock function still inside librdkafka (atomic):
                                  what a consumer's close waits for before it leaves the group */
    int wake_r, wake_w;        /* wake-up pipe for FD polling, -1 when disabled */
    int exhausted;             /* the last #drain stopped on its budget with events left */
    producer_part_t producer;
    consumer_part_t consumer;
} client_t;

extern VALUE sluice_cClient;
extern VALUE sluice_cAdmin;

client_t *sluice_client_get(VALUE self);
/* The struct of a usable handle; raises for a closed one or one inherited through fork. */
client_t *sluice_client_open(VALUE self);

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

/* produce.c: what the drain and destroy need of the in-flight table and topic cache. */
VALUE sluice_inflight_release(client_t *c, long slot);
void sluice_topics_release(client_t *c);
void sluice_topic_confs_release(client_t *c);

/* consumer.c, for consume.c and transactions.c */
client_t *sluice_consumer_open(VALUE self);
/* Raises ConsumerClosedError once another thread began closing the consumer. */
void sluice_consumer_not_closing(client_t *c);
/* Releases what a consumer holds besides the handle (release_native, no GVL). */
void sluice_consumer_release(client_t *c);
/* consume.c: the last #consume's events destroyed and its buffers freed; _free: the buffers only (a forked child) */
void sluice_consume_release(client_t *c);
void sluice_consume_free(client_t *c);

relay_t *sluice_relay_attach(rd_kafka_conf_t *conf);
void sluice_relay_start(relay_t *r, rd_kafka_t *rk, rd_kafka_queue_t *main_queue);
/* Takes the oldest item into *out (the caller frees it with sluice_relay_item_free); false when empty. */
int sluice_relay_pop(relay_t *r, relay_item_t *out);
void sluice_relay_item_free(relay_item_t *item);
size_t sluice_relay_length(relay_t *r);
void sluice_relay_set_pipe(relay_t *r, int wake_w);
/* Copies the lines of the log records queued so far from facility fac that
 * contain needle into buf ("; "-separated, truncated to size); how many matched. */
size_t sluice_relay_find_logs(relay_t *r, const char *fac, const char *needle, char *buf, size_t size);
void sluice_relay_close(relay_t *r);
void sluice_relay_free(relay_t *r);

/* admin.c: an admin request's result event -> [request_id, code, message, payload]; Qundef for other events. */
VALUE sluice_admin_result(rd_kafka_event_t *ev);

void sluice_init_drain(VALUE klass);
void sluice_init_admin(VALUE klass);
void sluice_init_produce(VALUE klass);
void sluice_init_transactions(VALUE klass);
void sluice_init_consumer(VALUE klass);
void sluice_init_consume(VALUE klass);

#endif
