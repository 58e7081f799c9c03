/*
 * What consumer.c (Sluice::Native::Consumer) shares: the consumer's struct,
 * which begins with the base's (client.h), the check every consumer call
 * makes (consume.c, transactions.c, test_hooks.c) and the end of the events
 * #consume took. consume.c calls consumer.c, never the other way round. Its
 * release and its close check reach the base through its kind's table
 * (consumer.c), not by name.
 */
#ifndef SLUICE_CONSUMER_H
#define SLUICE_CONSUMER_H

#include "client.h"

struct relay;

typedef struct {
    client_t base;             /* first: a consumer's client_t * points to its consumer_t */
    struct relay *relay;       /* where the main queue's events come from (its client_source_t, consumer.c) */
    rd_kafka_queue_t *sasl_queue; /* OAUTHBEARER refresh requests (NULL without OAUTHBEARER): the background
                                     queue would run them as callbacks, so they get a queue of their own */
    rd_kafka_queue_t *queue;   /* the consumer queue: messages, rebalances, consumer errors */
    struct partition_queues *partition_queues; /* each assigned partition's own queue, off the consumer queue
                                                  (partition_queues.c): #consume takes from each in turn. NULL
                                                  without SLUICE_OWN_PARTITION_QUEUES (a system librdkafka,
                                                  which lacks patch 0015): the consumer queue alone */
    int own_queues;            /* #own_partition_queues=: newly assigned partitions get their own queue */
    int wake_r, wake_w;        /* its wake-up pipe, waited on through Ruby's IO (fibers yield) */
    int exhausted;             /* the last #consume stopped with events left */
    rd_kafka_event_t **taken;  /* the last #consume's events, destroyed by the next one or by release (malloc'd) */
    const rd_kafka_message_t **taken_messages; /* each one's message (NULL: not a fetch) */
    long taken_count, taken_capa;
    int rebalance_due;         /* a rebalance went to Ruby and was not answered yet (#assign/#unassign) */
    VALUE topic_names;         /* frozen topic names, shared by every message of the topic */
    VALUE render_ops, render_null; /* #render_batches: fetched messages as text (render.c); nil: as Messages */
    int closing;               /* close began: calls of other threads are refused (consumer.c) */
    VALUE closer;              /* the thread running that close (nil before) */
    rd_kafka_topic_partition_list_t *stored; /* the offset stored last per partition, until revoked (consume.c's
                                                #take_stored: librdkafka has no getter); freed with taken */
} consumer_t;

/* Only for a client of the consumer kind (sluice_consumer_open checks). */
static inline consumer_t *sluice_consumer_of(client_t *c) { return (consumer_t *)c; }

/* The struct of a usable consumer; raises for a closed or closing one, one inherited through fork, or
 * another kind's. consumer.c's (its header's): a file that checks a consumer calls consumer.c. */
static inline client_t *sluice_consumer_open(VALUE self) {
    client_t *c = sluice_client_open(self);
    if (c->kind != RD_KAFKA_CONSUMER) rb_raise(rb_eTypeError, "not a consumer"); /* (only Native::Consumer makes one) */
    sluice_client_refuse(c); /* ConsumerClosedError once another thread began closing it */
    return c;
}

/* The last #consume's events destroyed (before the next #consume takes more, consume.c); any thread, with or
 * without the GVL. Their buffers are the struct's: consumer.c frees them with it. */
void sluice_consumer_destroy_taken(client_t *c);

#endif
